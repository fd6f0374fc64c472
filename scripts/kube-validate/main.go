// Command kube-validate checks Kubernetes manifests against the API's own Go
// types (k8s.io/api), with no cluster: every YAML document of the files given
// is decoded as the API server decodes it (sigs.k8s.io/yaml to JSON, then a
// case-sensitive decode that refuses unknown and duplicate fields, so a
// misspelled field or a quantity that does not parse is an error naming its
// path), then given the checks of the server's validation that matter for
// deploy/kubernetes/ (names, labels, selectors, ports, probes, resources,
// volumes, environment; see checks.go).
//
// Kinds it knows: apps/v1 Deployment, v1 Service, v1 Secret,
// networking.k8s.io/v1 NetworkPolicy. Any other kind is reported as not
// checked against API types (scripts/kube-lint.py checks those), but a pod
// template it embeds at spec.podTemplate or spec.template is still decoded
// strictly as a core/v1 PodTemplateSpec and checked like a Deployment's.
//
//	go run . FILE...    prints one line per document; exit 1 on any problem
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// document is one YAML document of a file, as JSON.
type document struct {
	where string // "file (document N)"
	json  []byte
	kind  string
	name  string
}

// known maps each kind checked against the API types to its apiVersion.
var known = map[string]string{
	"Deployment":    "apps/v1",
	"Service":       "v1",
	"Secret":        "v1",
	"NetworkPolicy": "networking.k8s.io/v1",
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kube-validate FILE.yaml...")
		os.Exit(2)
	}
	var docs []document
	failed := false
	for _, path := range os.Args[1:] {
		read, err := readDocuments(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kube-validate: %v\n", err)
			failed = true
			continue
		}
		docs = append(docs, read...)
	}
	var set manifestSet
	checked, unchecked := 0, 0
	for i := range docs {
		d := &docs[i]
		problems, typed := decodeAndCheck(d, &set)
		label := fmt.Sprintf("%s: %s %s", d.where, d.kind, d.name)
		switch {
		case len(problems) > 0:
			failed = true
			for _, p := range problems {
				fmt.Fprintf(os.Stderr, "%s: %s\n", label, p)
			}
		case typed:
			checked++
			fmt.Printf("%s: ok against %s types\n", label, known[d.kind])
		default:
			unchecked++
			fmt.Printf("%s: not checked against API types (%s)%s\n", label, d.kind, podTemplateNote(d))
		}
	}
	// Across documents: what a Service selects and the ports it targets.
	for _, p := range set.crossCheck() {
		failed = true
		fmt.Fprintf(os.Stderr, "%s\n", p)
	}
	if failed {
		fmt.Fprintln(os.Stderr, "kube-validate: the manifests do not pass the API types' checks")
		os.Exit(1)
	}
	fmt.Printf("kube-validate: %d documents ok against the API types, %d of other kinds\n", checked, unchecked)
}

// readDocuments splits path into its YAML documents, skipping empty ones
// (a file of comments only), and converts each to JSON the way the API
// machinery's YAML decoder does: YAML 1.1 scalars, duplicate keys refused.
func readDocuments(path string) ([]document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs []document
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading document %d: %w", path, n, err)
		}
		where := fmt.Sprintf("%s (document %d)", path, n)
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, fmt.Errorf("%s: not an object with apiVersion and kind: %w", where, err)
		}
		if head.Kind == "" || head.APIVersion == "" {
			return nil, fmt.Errorf("%s: apiVersion and kind are required", where)
		}
		if want, ok := known[head.Kind]; ok && head.APIVersion != want {
			return nil, fmt.Errorf("%s: %s has apiVersion %q; the API serves it as %q", where, head.Kind, head.APIVersion, want)
		}
		docs = append(docs, document{where: where, json: js, kind: head.Kind, name: head.Metadata.Name})
	}
}

// decodeAndCheck decodes d into its API type and checks it. typed is false
// for a kind without API types here (its pod template, if any, is checked).
func decodeAndCheck(d *document, set *manifestSet) (problems []string, typed bool) {
	switch d.kind {
	case "Deployment":
		var o appsv1.Deployment
		if problems = strictDecode(d.json, &o, ""); problems == nil {
			problems = errorStrings(checkDeployment(&o))
			set.deployments = append(set.deployments, &o)
		}
	case "Service":
		var o corev1.Service
		if problems = strictDecode(d.json, &o, ""); problems == nil {
			problems = errorStrings(checkService(&o))
			set.services = append(set.services, &o)
		}
	case "Secret":
		var o corev1.Secret
		if problems = strictDecode(d.json, &o, ""); problems == nil {
			problems = errorStrings(checkSecret(&o))
		}
	case "NetworkPolicy":
		var o networkingv1.NetworkPolicy
		if problems = strictDecode(d.json, &o, ""); problems == nil {
			problems = errorStrings(checkNetworkPolicy(&o))
		}
	default:
		return checkEmbeddedPodTemplate(d, set), false
	}
	return problems, true
}

// podTemplatePaths are where the kinds without API types here keep a pod
// template (agent-sandbox's Sandbox and SandboxTemplate: spec.podTemplate).
var podTemplatePaths = [][]string{{"spec", "podTemplate"}, {"spec", "template"}}

// embeddedPodTemplate returns the JSON of d's pod template and its path, or
// nil when it has none.
func embeddedPodTemplate(d *document) ([]byte, *field.Path) {
	var generic map[string]any
	if json.Unmarshal(d.json, &generic) != nil {
		return nil, nil
	}
	for _, p := range podTemplatePaths {
		var at any = generic
		for _, key := range p {
			m, ok := at.(map[string]any)
			if !ok {
				at = nil
				break
			}
			at = m[key]
		}
		if m, ok := at.(map[string]any); ok && m["spec"] != nil {
			js, err := json.Marshal(m)
			if err != nil {
				return nil, nil
			}
			return js, field.NewPath(p[0], p[1:]...)
		}
	}
	return nil, nil
}

func podTemplateNote(d *document) string {
	if _, path := embeddedPodTemplate(d); path != nil {
		return "; its " + path.String() + " is ok as a core/v1 PodTemplateSpec"
	}
	return ""
}

// checkEmbeddedPodTemplate decodes and checks the pod template of a kind
// without API types here.
func checkEmbeddedPodTemplate(d *document, set *manifestSet) []string {
	js, path := embeddedPodTemplate(d)
	if js == nil {
		return nil
	}
	var t corev1.PodTemplateSpec
	if problems := strictDecode(js, &t, path.String()); problems != nil {
		return problems
	}
	set.pods = append(set.pods, ownedPod{owner: d.kind + " " + d.name, labels: t.Labels, spec: &t.Spec})
	return errorStrings(checkPodTemplate(&t, path))
}

// strictDecode decodes js into out as the API server does: field names
// matched case-sensitively, unknown and duplicate fields refused. Each
// problem names the field's path, after prefix (the path of js in its
// document, "" for the whole document).
func strictDecode(js []byte, out any, prefix string) []string {
	strict, err := kjson.UnmarshalStrict(js, out, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		// A value its type refuses (a quantity such as "1Gx", a string
		// where a number goes): the decoder's error does not say where.
		var generic any
		if json.Unmarshal(js, &generic) == nil {
			if path, cause := locate(generic, reflect.TypeOf(out).Elem(), prefix); path != "" {
				return []string{fmt.Sprintf("%s: %v", path, cause)}
			}
		}
		return []string{err.Error()}
	}
	var problems []string
	for _, e := range strict {
		if fe, ok := e.(kjson.FieldError); ok && prefix != "" {
			fe.SetFieldPath(prefix + "." + fe.FieldPath())
		}
		problems = append(problems, e.Error())
	}
	return problems
}

// locate finds the deepest value of generic that does not decode into its
// field of type t, returning its path (from prefix) and the decoder's error.
func locate(generic any, t reflect.Type, prefix string) (string, error) {
	js, err := json.Marshal(generic)
	if err != nil {
		return "", nil
	}
	if _, err := kjson.UnmarshalStrict(js, reflect.New(t).Interface()); err == nil {
		return "", nil
	} else if deeper, cause := locateChild(generic, t, prefix); deeper != "" {
		return deeper, cause
	} else {
		return strings.TrimPrefix(prefix, "."), fmt.Errorf("%s: %w", js, err)
	}
}

func locateChild(generic any, t reflect.Type, prefix string) (string, error) {
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return "", nil // a leaf with its own syntax (resource.Quantity, IntOrString, Time)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := generic.(type) {
	case map[string]any:
		if t.Kind() == reflect.Map {
			for key, value := range v {
				if p, err := locate(value, t.Elem(), prefix+"["+key+"]"); p != "" {
					return p, err
				}
			}
			return "", nil
		}
		if t.Kind() != reflect.Struct {
			return "", nil
		}
		for key, value := range v {
			if ft, ok := fieldType(t, key); ok {
				if p, err := locate(value, ft, prefix+"."+key); p != "" {
					return p, err
				}
			}
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return "", nil
		}
		for i, value := range v {
			if p, err := locate(value, t.Elem(), fmt.Sprintf("%s[%d]", prefix, i)); p != "" {
				return p, err
			}
		}
	}
	return "", nil
}

// fieldType returns the type of t's field named key in JSON, looking into
// inlined (embedded) structs as encoding/json does.
func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			if ft, ok := fieldType(f.Type, key); ok {
				return ft, true
			}
			continue
		}
		if name == key {
			return f.Type, true
		}
	}
	return nil, false
}

func errorStrings(list field.ErrorList) []string {
	var out []string
	for _, e := range list {
		out = append(out, e.Error())
	}
	return out
}
