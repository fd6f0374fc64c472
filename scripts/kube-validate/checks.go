package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks below are the part of the API server's validation
// (k8s.io/kubernetes/pkg/apis/core/validation and apps/validation, which are
// not importable as a library) that a manifest of this project can get
// wrong, written against the same helpers and reported in the same form.

// ownedPod is a pod template and what defines it, for the Service checks.
type ownedPod struct {
	owner  string
	labels map[string]string
	spec   *corev1.PodSpec
}

// manifestSet holds what the checks across documents need.
type manifestSet struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	pods        []ownedPod
}

// crossCheck returns the problems between documents: a Service must select
// a pod the files define, and its named target ports must be declared there.
func (s *manifestSet) crossCheck() []string {
	pods := slices.Clone(s.pods)
	for _, d := range s.deployments {
		pods = append(pods, ownedPod{owner: "Deployment " + d.Name, labels: d.Spec.Template.Labels, spec: &d.Spec.Template.Spec})
	}
	var problems []string
	for _, svc := range s.services {
		if len(svc.Spec.Selector) == 0 {
			continue // endpoints managed by hand
		}
		selector := labels.SelectorFromSet(svc.Spec.Selector)
		matched := 0
		for _, pod := range pods {
			if !selector.Matches(labels.Set(pod.labels)) {
				continue
			}
			matched++
			for i, port := range svc.Spec.Ports {
				if port.TargetPort.Type == intstr.String && !declaresPort(pod.spec, port.TargetPort) {
					problems = append(problems, fmt.Sprintf("Service %s: spec.ports[%d].targetPort: %q is not a port name of %s's containers", svc.Name, i, port.TargetPort.StrVal, pod.owner))
				}
			}
		}
		if matched == 0 {
			problems = append(problems, fmt.Sprintf("Service %s: spec.selector: %v selects no pod template of these files", svc.Name, svc.Spec.Selector))
		}
	}
	return problems
}

// declaresPort reports whether a container of spec declares port (a name or
// a number).
func declaresPort(spec *corev1.PodSpec, port intstr.IntOrString) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
				return true
			}
		}
	}
	return false
}

// checkObjectMeta checks a top-level object's metadata; nameFn is the kind's
// name rule. The namespace is optional in a manifest (kubectl fills it).
func checkObjectMeta(meta metav1.ObjectMeta, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	path := field.NewPath("metadata")
	var errs field.ErrorList
	if meta.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(meta.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), meta.Namespace, msg))
		}
		meta.Namespace = ""
	}
	return append(errs, apivalidation.ValidateObjectMeta(&meta, false, nameFn, path)...)
}

func checkDeployment(d *appsv1.Deployment) field.ErrorList {
	errs := checkObjectMeta(d.ObjectMeta, apivalidation.NameIsDNSSubdomain)
	spec := field.NewPath("spec")
	if d.Spec.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*d.Spec.Replicas), spec.Child("replicas"))...)
	}
	switch d.Spec.Strategy.Type {
	case "", appsv1.RollingUpdateDeploymentStrategyType:
	case appsv1.RecreateDeploymentStrategyType:
		if d.Spec.Strategy.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(spec.Child("strategy", "rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("strategy", "type"), d.Spec.Strategy.Type, []string{"Recreate", "RollingUpdate"}))
	}
	if d.Spec.Selector == nil || (len(d.Spec.Selector.MatchLabels) == 0 && len(d.Spec.Selector.MatchExpressions) == 0) {
		errs = append(errs, field.Required(spec.Child("selector"), "a Deployment needs a non-empty selector"))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(d.Spec.Selector, metavalidation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
		if selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil {
			errs = append(errs, field.Invalid(spec.Child("selector"), d.Spec.Selector, err.Error()))
		} else if !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
			errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), d.Spec.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	template := d.Spec.Template
	errs = append(errs, checkPodTemplate(&template, spec.Child("template"))...)
	if rp := template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(spec.Child("template", "spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyAlways)}))
	}
	return errs
}

// checkPodTemplate checks a pod template's labels, annotations and spec.
func checkPodTemplate(t *corev1.PodTemplateSpec, at *field.Path) field.ErrorList {
	errs := metavalidation.ValidateLabels(t.Labels, at.Child("metadata", "labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, at.Child("metadata", "annotations"))...)
	return append(errs, checkPodSpec(&t.Spec, at.Child("spec"))...)
}

func checkPodSpec(spec *corev1.PodSpec, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.TerminationGracePeriodSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.TerminationGracePeriodSeconds, at.Child("terminationGracePeriodSeconds"))...)
	}
	if spec.RuntimeClassName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*spec.RuntimeClassName) {
			errs = append(errs, field.Invalid(at.Child("runtimeClassName"), *spec.RuntimeClassName, msg))
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		at := at.Child("securityContext")
		errs = append(errs, checkIDs(sc.RunAsUser, sc.RunAsGroup, at)...)
		if sc.FSGroup != nil {
			for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
				errs = append(errs, field.Invalid(at.Child("fsGroup"), *sc.FSGroup, msg))
			}
		}
		errs = append(errs, checkSeccomp(sc.SeccompProfile, at.Child("seccompProfile"))...)
	}
	volumes := map[string]bool{}
	for i, v := range spec.Volumes {
		at := at.Child("volumes").Index(i)
		errs = append(errs, checkName(v.Name, validation.IsDNS1123Label, at.Child("name"))...)
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(at.Child("name"), v.Name))
		}
		volumes[v.Name] = true
		if n := volumeSources(&v.VolumeSource); n != 1 {
			errs = append(errs, field.Invalid(at, v.Name, fmt.Sprintf("must have exactly one volume type, has %d", n)))
		}
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(at.Child("emptyDir", "sizeLimit"), v.EmptyDir.SizeLimit.String(), "must be greater than or equal to 0"))
		}
	}
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(at.Child("containers"), "a pod needs a container"))
	}
	names := map[string]bool{}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		at := at.Child("containers").Index(i)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(at.Child("name"), c.Name))
		}
		names[c.Name] = true
		errs = append(errs, checkContainer(c, volumes, at)...)
	}
	return errs
}

// volumeSources counts the volume types set in s (the API allows one).
func volumeSources(s *corev1.VolumeSource) int {
	n := 0
	for _, set := range []bool{s.HostPath != nil, s.EmptyDir != nil, s.Secret != nil, s.ConfigMap != nil,
		s.PersistentVolumeClaim != nil, s.Projected != nil, s.DownwardAPI != nil, s.Ephemeral != nil,
		s.CSI != nil, s.NFS != nil, s.Image != nil} {
		if set {
			n++
		}
	}
	// The rarer, mostly in-tree types: any of them counts too.
	for _, set := range []bool{s.GCEPersistentDisk != nil, s.AWSElasticBlockStore != nil, s.GitRepo != nil,
		s.ISCSI != nil, s.Glusterfs != nil, s.RBD != nil, s.FlexVolume != nil, s.Cinder != nil, s.CephFS != nil,
		s.Flocker != nil, s.FC != nil, s.AzureFile != nil, s.VsphereVolume != nil, s.Quobyte != nil,
		s.AzureDisk != nil, s.PhotonPersistentDisk != nil, s.PortworxVolume != nil, s.ScaleIO != nil, s.StorageOS != nil} {
		if set {
			n++
		}
	}
	return n
}

func checkContainer(c *corev1.Container, volumes map[string]bool, at *field.Path) field.ErrorList {
	errs := checkName(c.Name, validation.IsDNS1123Label, at.Child("name"))
	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(at.Child("image"), "a container needs an image"))
	}
	switch c.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, field.NotSupported(at.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		errs = append(errs, field.Invalid(at.Child("workingDir"), c.WorkingDir, "must be an absolute path"))
	}
	portNames := map[string]bool{}
	for i, p := range c.Ports {
		at := at.Child("ports").Index(i)
		errs = append(errs, checkPortName(p.Name, validation.IsValidPortName, portNames, at.Child("name"))...)
		errs = append(errs, checkPortNumber(int(p.ContainerPort), at.Child("containerPort"))...)
		if p.HostPort != 0 {
			errs = append(errs, checkPortNumber(int(p.HostPort), at.Child("hostPort"))...)
		}
		errs = append(errs, checkProtocol(p.Protocol, at.Child("protocol"))...)
	}
	for i, e := range c.Env {
		at := at.Child("env").Index(i)
		errs = append(errs, checkName(e.Name, validation.IsEnvVarName, at.Child("name"))...)
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			errs = append(errs, field.Invalid(at.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		if ref := e.ValueFrom.SecretKeyRef; ref != nil {
			errs = append(errs, checkName(ref.Name, validation.IsDNS1123Subdomain, at.Child("valueFrom", "secretKeyRef", "name"))...)
			errs = append(errs, checkName(ref.Key, validation.IsConfigMapKey, at.Child("valueFrom", "secretKeyRef", "key"))...)
		}
	}
	errs = append(errs, checkResources(&c.Resources, at.Child("resources"))...)
	errs = append(errs, checkProbe(c.ReadinessProbe, c, at.Child("readinessProbe"), false)...)
	errs = append(errs, checkProbe(c.LivenessProbe, c, at.Child("livenessProbe"), true)...)
	errs = append(errs, checkProbe(c.StartupProbe, c, at.Child("startupProbe"), true)...)
	mountPaths := map[string]bool{}
	for i, m := range c.VolumeMounts {
		at := at.Child("volumeMounts").Index(i)
		if !volumes[m.Name] {
			errs = append(errs, field.NotFound(at.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(at.Child("mountPath"), ""))
		} else if mountPaths[m.MountPath] {
			errs = append(errs, field.Invalid(at.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths[m.MountPath] = true
	}
	if sc := c.SecurityContext; sc != nil {
		at := at.Child("securityContext")
		errs = append(errs, checkIDs(sc.RunAsUser, sc.RunAsGroup, at)...)
		errs = append(errs, checkSeccomp(sc.SeccompProfile, at.Child("seccompProfile"))...)
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			if sc.Privileged != nil && *sc.Privileged {
				errs = append(errs, field.Invalid(at, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
			}
			if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN") {
				errs = append(errs, field.Invalid(at, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
			}
		}
	}
	return errs
}

// checkProbe checks one probe: exactly one handler, its port declared by
// the container (a probe on a port nothing listens on fails forever), and
// its numbers in range.
func checkProbe(p *corev1.Probe, c *corev1.Container, at *field.Path, successMustBeOne bool) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	handlers := 0
	if h := p.HTTPGet; h != nil {
		handlers++
		errs = append(errs, checkProbePort(h.Port, c, at.Child("httpGet", "port"))...)
		if h.Path != "" && !strings.HasPrefix(h.Path, "/") {
			errs = append(errs, field.Invalid(at.Child("httpGet", "path"), h.Path, "must start with /"))
		}
		switch h.Scheme {
		case "", corev1.URISchemeHTTP, corev1.URISchemeHTTPS:
		default:
			errs = append(errs, field.NotSupported(at.Child("httpGet", "scheme"), h.Scheme, []string{"HTTP", "HTTPS"}))
		}
	}
	if t := p.TCPSocket; t != nil {
		handlers++
		errs = append(errs, checkProbePort(t.Port, c, at.Child("tcpSocket", "port"))...)
	}
	if p.Exec != nil {
		handlers++
	}
	if g := p.GRPC; g != nil {
		handlers++
		errs = append(errs, checkPortNumber(int(g.Port), at.Child("grpc", "port"))...)
	}
	if handlers != 1 {
		errs = append(errs, field.Invalid(at, handlers, "must specify exactly one of exec, httpGet, tcpSocket, grpc"))
	}
	for name, v := range map[string]int32{"initialDelaySeconds": p.InitialDelaySeconds, "timeoutSeconds": p.TimeoutSeconds,
		"periodSeconds": p.PeriodSeconds, "successThreshold": p.SuccessThreshold, "failureThreshold": p.FailureThreshold} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v), at.Child(name))...)
	}
	if successMustBeOne && p.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(at.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

func checkProbePort(port intstr.IntOrString, c *corev1.Container, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.String {
		errs = checkName(port.StrVal, validation.IsValidPortName, at)
	} else {
		errs = checkPortNumber(int(port.IntVal), at)
	}
	if len(errs) == 0 && !declaresPort(&corev1.PodSpec{Containers: []corev1.Container{*c}}, port) {
		errs = append(errs, field.Invalid(at, port.String(), "the container declares no such port (ports[].containerPort or ports[].name)"))
	}
	return errs
}

// checkResources checks the resource names and that no request exceeds
// its limit (the quantities themselves were parsed by the strict decode).
func checkResources(r *corev1.ResourceRequirements, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	for list, values := range map[string]corev1.ResourceList{"limits": r.Limits, "requests": r.Requests} {
		for name, q := range values {
			at := at.Child(list).Key(string(name))
			if !strings.Contains(string(name), "/") {
				switch {
				case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage,
					strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
				default:
					errs = append(errs, field.Invalid(at, name, "must be a standard resource name (cpu, memory, ephemeral-storage, hugepages-<size>) or a fully qualified one"))
				}
			} else {
				for _, msg := range validation.IsQualifiedName(string(name)) {
					errs = append(errs, field.Invalid(at, name, msg))
				}
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(at, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for name, request := range r.Requests {
		if limit, ok := r.Limits[name]; ok && request.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(at.Child("requests").Key(string(name)), request.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func checkIDs(user, group *int64, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(at.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(at.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

func checkSeccomp(p *corev1.SeccompProfile, at *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
		if p.LocalhostProfile != nil {
			return field.ErrorList{field.Invalid(at.Child("localhostProfile"), *p.LocalhostProfile, "can only be set when `type` is Localhost")}
		}
	case corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return field.ErrorList{field.Required(at.Child("localhostProfile"), "when `type` is Localhost")}
		}
	default:
		return field.ErrorList{field.NotSupported(at.Child("type"), p.Type, []string{"Localhost", "RuntimeDefault", "Unconfined"})}
	}
	return nil
}

func checkService(s *corev1.Service) field.ErrorList {
	errs := checkObjectMeta(s.ObjectMeta, apivalidation.NameIsDNS1035Label)
	spec := field.NewPath("spec")
	switch s.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(s.Spec.Ports) == 0 && s.Spec.ClusterIP != corev1.ClusterIPNone {
			errs = append(errs, field.Required(spec.Child("ports"), "a Service needs a port"))
		}
	case corev1.ServiceTypeExternalName:
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), s.Spec.Type, []string{"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}))
	}
	errs = append(errs, metavalidation.ValidateLabels(s.Spec.Selector, spec.Child("selector"))...)
	names := map[string]bool{}
	for i, p := range s.Spec.Ports {
		at := spec.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(at.Child("name"), "every port needs a name when there are several"))
		}
		errs = append(errs, checkPortName(p.Name, validation.IsDNS1123Label, names, at.Child("name"))...)
		errs = append(errs, checkPortNumber(int(p.Port), at.Child("port"))...)
		errs = append(errs, checkProtocol(p.Protocol, at.Child("protocol"))...)
		switch p.TargetPort.Type {
		case intstr.String:
			errs = append(errs, checkName(p.TargetPort.StrVal, validation.IsValidPortName, at.Child("targetPort"))...)
		default:
			if p.TargetPort.IntVal != 0 {
				errs = append(errs, checkPortNumber(int(p.TargetPort.IntVal), at.Child("targetPort"))...)
			}
		}
	}
	return errs
}

func checkSecret(s *corev1.Secret) field.ErrorList {
	errs := checkObjectMeta(s.ObjectMeta, apivalidation.NameIsDNSSubdomain)
	size := 0
	for key, value := range s.Data {
		errs = append(errs, checkName(key, validation.IsConfigMapKey, field.NewPath("data").Key(key))...)
		size += len(value)
	}
	for key, value := range s.StringData {
		errs = append(errs, checkName(key, validation.IsConfigMapKey, field.NewPath("stringData").Key(key))...)
		size += len(value)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize))
	}
	return errs
}

func checkNetworkPolicy(n *networkingv1.NetworkPolicy) field.ErrorList {
	errs := checkObjectMeta(n.ObjectMeta, apivalidation.NameIsDNSSubdomain)
	spec := field.NewPath("spec")
	errs = append(errs, metavalidation.ValidateLabelSelector(&n.Spec.PodSelector, metavalidation.LabelSelectorValidationOptions{}, spec.Child("podSelector"))...)
	for i, t := range n.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(spec.Child("policyTypes").Index(i), t, []string{"Ingress", "Egress"}))
		}
	}
	checkPorts := func(ports []networkingv1.NetworkPolicyPort, at *field.Path) {
		for i, p := range ports {
			at := at.Index(i)
			if p.Protocol != nil {
				errs = append(errs, checkProtocol(*p.Protocol, at.Child("protocol"))...)
			}
			if p.Port != nil {
				if p.Port.Type == intstr.Int {
					errs = append(errs, checkPortNumber(int(p.Port.IntVal), at.Child("port"))...)
				} else {
					errs = append(errs, checkName(p.Port.StrVal, validation.IsValidPortName, at.Child("port"))...)
				}
			}
		}
	}
	for i, rule := range n.Spec.Ingress {
		checkPorts(rule.Ports, spec.Child("ingress").Index(i).Child("ports"))
	}
	for i, rule := range n.Spec.Egress {
		checkPorts(rule.Ports, spec.Child("egress").Index(i).Child("ports"))
	}
	return errs
}

func checkName(value string, rule func(string) []string, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range rule(value) {
		errs = append(errs, field.Invalid(at, value, msg))
	}
	return errs
}

func checkPortNumber(port int, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(port) {
		errs = append(errs, field.Invalid(at, port, msg))
	}
	return errs
}

func checkProtocol(p corev1.Protocol, at *field.Path) field.ErrorList {
	switch p {
	case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	}
	return field.ErrorList{field.NotSupported(at, p, []string{"SCTP", "TCP", "UDP"})}
}

// checkPortName checks a port's name, when it has one, with valid, and
// that no earlier port of the same list (seen, which it extends) has it.
func checkPortName(name string, valid func(string) []string, seen map[string]bool, at *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	errs := checkName(name, valid, at)
	if seen[name] {
		errs = append(errs, field.Duplicate(at, name))
	}
	seen[name] = true
	return errs
}
