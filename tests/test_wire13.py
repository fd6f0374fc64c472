"""End-to-end tests of wire 1.3: nothing written is lost (spill), and one call per exchange.

Written from the contract alone (the 1.3 wire page, sections "Nothing
written is lost: spill" and "One call per exchange"), black box, before the
features existed; they are the acceptance suite of those two sections.
Every server here is the test's own.

How the page is read where it leaves room (each decision is repeated next
to the tests it shapes):

- Scope.  The page's first paragraph puts everything under
  MCP_EXEC_PROFILE=agent or a setting unless a line says "everywhere", and
  no line of these two sections says "everywhere".  So "a grep result
  always carries dropped_bytes" means: every grep result under the profile,
  0 included; outside the profile grep answers exactly as it did before
  1.3.  The same holds for the argument hints, the plain view, the line
  boundary cuts, `wait`'s early return and its running entries: profile
  only, and 1.0's shapes outside it.
- `input`'s `yield_after` is an argument: it is accepted everywhere; only
  its default differs (2 s under the profile, absent outside it).
- Spill files are found the way an operator would: under
  MCP_EXEC_SPILL=DIR by walking DIR, and in any mode among the regular
  files the server process holds open (which also finds files that were
  unlinked after being opened) or under the TMPDIR the test gives it.
  "A directory of the server's own" is read as a private directory (no
  group or other access), not the shared temporary directory itself, and
  removed with its files at exit.
- An explicit MCP_EXEC_SPILL=DIR inside MCP_EXEC_ROOTS is refused at start
  (exit 2 naming the variable), as 1.1 validates every setting.
- The spill bound: the oldest reachable byte is at least total minus
  (window + MCP_EXEC_SPILL_BYTES) and at most half a spill bound later
  (an implementation may drop spilled bytes in chunks); `dropped_bytes`
  counts exactly what 1.0 counts for a window: the requested bytes that
  are gone.
- "clamped" reports the lowered argument whatever the outcome (the
  argument was lowered when the call began); on `wait`, whose result is
  an array, it is looked for on the entries.
- `input` that makes the job read again returns with "waiting_for_input":
  true (that is the reason it returned, before the 1 s silence 1.1 uses
  for a job nobody just wrote to).
"""

import os
import re
import shutil
import signal
import stat
import tempfile
import time
import uuid

import pytest

from tests.helpers import (EXIT_WITHIN, SLACK, TARGET, assert_startup_refused, check_gap, needs_host_files,
                           numbered, short, timed, wait_until)

AGENT = {"MCP_EXEC_PROFILE": "agent"}
KIB = 1024
MIB = 1024 * 1024

# A few seconds of tolerance for "returns at about t" on a loaded 2-core VM.
LATE = 3.0 + SLACK
# "At once": a call that must not wait for its timeout comes back within this.
PROMPTLY = 5.0 + SLACK

# Put before a marker line so it lies past the profile's 16 KiB kept head
# (24 KiB of `seq 1 5000`): what the head keeps in memory need not spill.
PAST_HEAD = "seq 1 5000"

# The stream most spill tests read: `seq 1 600000`, 4 088 895 bytes, four
# times the default 1 MiB window.
SEQ_N = 600000
SEQ = "seq 1 %d" % SEQ_N
_FULL = []


def full():
    """The bytes `seq 1 600000` prints."""
    if not _FULL:
        _FULL.append(numbered(1, SEQ_N))
    return _FULL[0]


def line_at(n):
    """Offset of line n ("n\\n") in the output of `seq 1 ...`."""
    at, width, first = 0, 1, 1
    while first * 10 <= n:
        at += (first * 10 - first) * (width + 1)
        first *= 10
        width += 1
    return at + (n - first) * (width + 1)


assert line_at(1) == 0 and line_at(10) == 18 and line_at(SEQ_N + 1) == 4088895


def python3():
    """A python3 that starts fast (not a version manager's shim)."""
    if TARGET == "container":
        pytest.skip("no python3 where the server runs (the default image has none)")
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(p):
            return p
    pytest.skip("needs python3 in /usr/bin or /usr/local/bin")


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def agent(raw_server, **extra):
    """A fresh server under the agent profile, with extra settings."""
    env = dict(AGENT)
    env.update(extra)
    return raw_server(env=env)


def done_job(s, command, **kw):
    """A nowait job of command, its stdin closed, ended and not delivered."""
    jid = s.job(command, close_stdin=True, **kw)
    s.until_done(jid, timeout=60)
    return jid


def out(s, jid, spec, stream="stdout", **kw):
    args = {"job_id": jid, stream: spec}
    args.update(kw)
    return s.tool("output", args, timeout=60)


def grep_hits(sl):
    """The list of {"offset", "line"} entries of a grep answer's slice."""
    for value in sl.values():
        if isinstance(value, list) and all(isinstance(h, dict) and "offset" in h and "line" in h for h in value):
            return value
    raise AssertionError("no list of {offset, line} matches in the grep answer: %s" % short(sl))


def hit_lines(sl):
    return [(h["offset"], h["line"].rstrip("\n")) for h in grep_hits(sl)]


def grep_dropped(res, stream="stdout"):
    """The dropped_bytes a grep answer carries: in its slice, or in the
    slice's `searched` range (where 1.2 put it)."""
    sl = res[stream]
    if "dropped_bytes" in sl:
        return sl["dropped_bytes"]
    searched = sl.get("searched")
    if isinstance(searched, dict) and "dropped_bytes" in searched:
        return searched["dropped_bytes"]
    raise AssertionError("a grep result must always carry dropped_bytes: %s" % short(res))


def prose(obj, skip=("matches",)):
    """Every string value in a result, the matched lines left out: where a
    sentence for the model can be."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [t for k, v in obj.items() if k not in skip for t in prose(v, skip)]
    if isinstance(obj, list):
        return [t for v in obj for t in prose(v, skip)]
    return []


def clamped_of(result):
    """The "clamped" a result carries; for wait's array, on its entries."""
    if isinstance(result, dict):
        return result.get("clamped")
    found = [e["clamped"] for e in result if isinstance(e, dict) and "clamped" in e]
    assert all(f == found[0] for f in found), result
    return found[0] if found else None


def recent(r, stream="stdout"):
    return (r.get("recent") or {}).get(stream)


def fresh_dir(prefix="mcpx-w13-"):
    d = tempfile.mkdtemp(prefix=prefix)
    return d


@pytest.fixture
def tmpdirs():
    """Factory of fresh host directories, removed afterwards."""
    made = []

    def make(prefix="mcpx-w13-"):
        d = fresh_dir(prefix)
        made.append(d)
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


# ---- finding spill files ---------------------------------------------------

def _opened_for_writing(pid, fd):
    """Whether fd of pid was opened with write access (O_WRONLY or O_RDWR):
    a spill file is written, a file the server only reads is not one."""
    text = read_text("/proc/%d/fdinfo/%s" % (pid, fd))
    m = re.search(r"^flags:\s*([0-7]+)$", text, re.M)
    return bool(m) and int(m.group(1), 8) & 3 != 0


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _open_files(s, written=False):
    """{(dev, ino): (fd link, target)} of the regular files the server holds
    open (with written, only those opened for writing), leaving out /proc,
    /sys and /dev (the Go runtime reads cgroup files)."""
    pid = s.host_pid()
    found = {}
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return found
    for fd in fds:
        link = "/proc/%d/fd/%s" % (pid, fd)
        try:
            target = os.readlink(link)
            st = os.stat(link)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or target.startswith(("/proc/", "/sys/", "/dev/")):
            continue
        if written and not _opened_for_writing(pid, fd):
            continue
        found[(st.st_dev, st.st_ino)] = (link, target)
    return found


def _files_under(top):
    """{(dev, ino): path} of the regular files under top."""
    found = {}
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found[(st.st_dev, st.st_ino)] = p
    return found


class SpillFile:
    """One spill file: a path to read it by (its name, or the server's fd
    link when it has no name) and its name as the server sees it."""

    def __init__(self, key, path, target):
        self.key, self.path, self.target = key, path, target

    @property
    def named(self):
        return self.target if self.target and not self.target.endswith(" (deleted)") else None

    def stat(self):
        return os.stat(self.path)

    def read(self):
        with open(self.path, "rb") as f:
            return f.read()

    def __repr__(self):
        return "SpillFile(%r)" % (self.target or self.path)


def spill_files(s, before=frozenset(), dirs=()):
    """The spill files of server s: regular files under dirs, and regular
    files it holds open, that were not there in `before` (a set of keys)."""
    files = {}
    for top in dirs:
        for key, p in _files_under(top).items():
            if key not in before:
                files[key] = SpillFile(key, p, p)
    for key, (link, target) in _open_files(s, written=True).items():
        if key not in before and key not in files:
            files[key] = SpillFile(key, link, target)
    return list(files.values())


def file_keys(s, dirs=()):
    keys = set(_open_files(s))
    for top in dirs:
        keys |= set(_files_under(top))
    return frozenset(keys)


def await_spill_files(s, before, dirs=(), what="a spill file"):
    return wait_until(lambda: spill_files(s, before, dirs), 20 + SLACK,
                      "%s appearing (none under %s nor open by the server)" % (what, list(dirs)))


def still_there(s, files, dirs=()):
    """The files of `files` that still exist: by name, under dirs, or open."""
    keys = set(_open_files(s)) if s.proc.poll() is None else set()
    for top in dirs:
        keys |= set(_files_under(top))
    left = [f for f in files if f.key in keys]
    for f in files:
        if f.named and os.path.exists(f.named) and f not in left:
            left.append(f)
    return left


# ==========================================================================
# Nothing written is lost: spill
# ==========================================================================

def test_output_from_reaches_a_middle_line_of_a_4mb_stream(raw_server):
    s = agent(raw_server)
    jid = done_job(s, SEQ)
    at = line_at(300000)
    o = out(s, jid, {"from": at, "length": 7})
    sl = o["stdout"]
    assert sl["data"] == "300000\n" and sl["offset"] == at and sl["bytes"] == 7, short(o)
    assert sl["truncated"] is False and "dropped_bytes" not in sl, short(o)
    assert sl["total_bytes"] == len(full()), short(o)
    # the very first bytes too
    o = out(s, jid, {"from": 0, "length": 10})
    assert o["stdout"]["data"] == "1\n2\n3\n4\n5\n" and o["stdout"]["truncated"] is False, short(o)


def test_output_tail_reaches_back_past_the_window(raw_server):
    s = agent(raw_server)
    jid = done_job(s, SEQ)
    o = out(s, jid, {"tail": 400000})
    sl = o["stdout"]
    assert sl["truncated"] is False and "dropped_bytes" not in sl, short(o)
    assert sl["offset"] == line_at(200001), short(o)
    assert sl["data"].startswith("200001\n200002\n"), short(o)
    assert full()[sl["offset"]:sl["offset"] + sl["bytes"]] == sl["data"].encode(), "head bytes not exact"
    if "omitted" in sl:  # cut to the reply budget
        head, om, tail = check_gap(sl, total=len(full()))
        assert full()[tail["offset"]:] == tail["data"].encode(), "tail bytes not exact"
    else:
        assert sl["offset"] + sl["bytes"] == len(full()), short(o)


def test_output_all_and_its_gap_reach_every_byte(raw_server):
    s = agent(raw_server)
    jid = done_job(s, SEQ)
    o = out(s, jid, "all")
    sl = o["stdout"]
    assert sl["offset"] == 0 and sl["truncated"] is False and "dropped_bytes" not in sl, short(o)
    head, om, tail = check_gap(sl, total=len(full()))  # 4 MB cannot fit the profile's budget
    assert full()[:sl["bytes"]] == head.encode(), "head bytes not exact"
    assert full()[tail["offset"]:] == tail["data"].encode(), "tail bytes not exact"
    # the gap is readable, at its start and in its middle
    for at in (om["offset"], om["offset"] + om["bytes"] // 2):
        g = out(s, jid, {"from": at, "length": 4096})["stdout"]
        assert g["truncated"] is False and g["offset"] == at and g["bytes"] == 4096, short(g)
        assert g["data"].encode() == full()[at:at + 4096], "gap bytes at %d not exact" % at


def test_grep_searches_every_byte_ever_written(raw_server):
    s = agent(raw_server)
    jid = done_job(s, SEQ)
    o = out(s, jid, {"grep": "^300000$"})
    assert hit_lines(o["stdout"]) == [(line_at(300000), "300000")], short(o)
    assert o["stdout"]["match_count"] == 1, short(o)
    assert grep_dropped(o) == 0, short(o)
    # a count over the whole stream: 60 000 numbers of 1..600000 end in 7
    o = out(s, jid, {"grep": "7$", "max": 2})
    assert o["stdout"]["match_count"] == 60000, short(o)
    assert hit_lines(o["stdout"]) == [(line_at(7), "7"), (line_at(17), "17")], short(o)


def test_a_cut_results_gap_is_readable_after_delivery(raw_server):
    s = agent(raw_server)
    r = s.tool("execute", {"command": SEQ}, timeout=60 + SLACK)
    assert r["state"] == "success" and r.get("kept") is True, short(r)
    head, om, tail = check_gap(r["stdout"], total=len(full()))
    jid = r["job_id"]
    for at in (om["offset"], line_at(300000), om["offset"] + om["bytes"] - 4096):
        g = out(s, jid, {"from": at, "length": 4096})["stdout"]
        assert g["truncated"] is False and g["offset"] == at, short(g)
        assert g["data"].encode() == full()[at:at + 4096], "gap bytes at %d not exact" % at


def test_a_running_jobs_stderr_is_spilled_too(raw_server):
    """Each stream spills on its own, and output reads a running job's."""
    s = agent(raw_server)
    jid = s.job("%s >&2; echo done; exec sleep 300" % SEQ)
    try:
        s.poll_output(jid, lambda d: d == "done\n")
        at = line_at(123456)
        o = out(s, jid, {"from": at, "length": 7}, stream="stderr")
        assert o["state"] == "running", short(o)
        assert o["stderr"]["data"] == "123456\n" and o["stderr"]["truncated"] is False, short(o)
        o = out(s, jid, {"grep": "^123456$"}, stream="stderr")
        assert hit_lines(o["stderr"]) == [(at, "123456")] and grep_dropped(o, "stderr") == 0, short(o)
    finally:
        s.cleanup(jid)


def test_without_the_profile_the_window_still_drops_as_in_1_0(raw_server):
    """No setting: spill is off, a middle line is gone, and grep answers
    with 1.2's shape (no dropped_bytes: that line is profile-only)."""
    s = raw_server()
    jid = done_job(s, SEQ)
    start = len(full()) - MIB
    o = out(s, jid, {"from": line_at(300000), "length": 7})
    assert o["stdout"] == {"data": full()[start:start + 7].decode(), "offset": start, "bytes": 7,
                           "total_bytes": len(full()), "truncated": True, "dropped_bytes": 7}, short(o)
    o = out(s, jid, {"grep": "^1$"})
    assert o["stdout"] == {"matches": [], "match_count": 0,
                           "searched": {"from": start, "to": len(full())}}, short(o)


def test_spill_off_under_the_profile_keeps_1_2_windows(raw_server):
    s = agent(raw_server, MCP_EXEC_SPILL="off")
    jid = done_job(s, SEQ)
    o = out(s, jid, {"from": line_at(300000), "length": 7})
    assert o["stdout"]["truncated"] is True and o["stdout"]["dropped_bytes"] == 7, short(o)


def test_spill_dir_outside_the_profile_files_are_0600(raw_server, tmpdirs):
    """A setting turns spill on without the profile; its files are private."""
    needs_host_files()
    d = tmpdirs()
    s = raw_server(env={"MCP_EXEC_SPILL": d})
    before = file_keys(s, [d])
    jid = done_job(s, SEQ)
    o = out(s, jid, {"from": line_at(300000), "length": 7})
    assert o["stdout"]["data"] == "300000\n" and o["stdout"]["truncated"] is False, short(o)
    files = await_spill_files(s, before, [d])
    for f in files:
        st = f.stat()
        assert stat.S_IMODE(st.st_mode) == 0o600, "%r has mode %o" % (f, stat.S_IMODE(st.st_mode))
        assert st.st_uid == os.geteuid(), f
        if f.named:
            assert os.path.realpath(f.named).startswith(os.path.realpath(d) + os.sep), \
                "a spill file outside MCP_EXEC_SPILL=%s: %r" % (d, f)
    assert b"".join(f.read() for f in files).find(b"\n300000\n") >= 0, \
        "the spilled bytes (line 300000) are in none of %r" % files


def test_auto_spill_is_private_and_outside_the_roots(raw_server, tmpdirs):
    """Under auto the files sit in a private directory of the server's own,
    never inside MCP_EXEC_ROOTS, even when the server's TMPDIR is there."""
    needs_host_files()
    root = tmpdirs()
    tmp = os.path.join(root, "tmp")
    os.mkdir(tmp)
    s = agent(raw_server, MCP_EXEC_ROOTS=root, TMPDIR=tmp)
    before = file_keys(s, [tmp])
    token = "SPILLED-%s" % uuid.uuid4().hex
    jid = done_job(s, "%s; echo %s; %s" % (PAST_HEAD, token, SEQ))
    o = out(s, jid, {"grep": token})
    assert [line for _, line in hit_lines(o["stdout"])] == [token], short(o)
    files = await_spill_files(s, before, [tmp])
    real_root = os.path.realpath(root) + os.sep
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, "%r has mode %o" % (f, stat.S_IMODE(f.stat().st_mode))
        if f.named:
            assert not os.path.realpath(f.named).startswith(real_root), \
                "spill file %r inside MCP_EXEC_ROOTS=%s" % (f, root)
            parent = os.path.dirname(f.named)
            assert os.path.realpath(parent) not in (os.path.realpath(tmp), "/tmp", "/var/tmp"), \
                "spill file %r lies in a shared directory, not one of the server's own" % f
            pst = os.stat(parent)
            assert stat.S_IMODE(pst.st_mode) & 0o077 == 0, \
                "the spill directory %s has mode %o" % (parent, stat.S_IMODE(pst.st_mode))
    assert any(token.encode() in f.read() for f in files), "the token is in none of %r" % files
    # and nothing under the roots holds it, as a job there can see
    r = s.run("grep -rl %s %s || true" % (token, root))
    assert r.get("stdout", {}).get("data", "") == "", short(r)


def test_explicit_spill_dir_inside_the_roots_is_refused(tmpdirs):
    needs_host_files()  # the roots are host directories
    root = tmpdirs()
    inside = os.path.join(root, "spill")
    os.mkdir(inside)
    err = assert_startup_refused({"MCP_EXEC_ROOTS": root, "MCP_EXEC_SPILL": inside}, "MCP_EXEC_SPILL")
    assert root in err, err


@pytest.mark.parametrize("var,value", [("MCP_EXEC_SPILL_BYTES", "lots"), ("MCP_EXEC_SPILL_BYTES", "-1"),
                                       ("MCP_EXEC_SPILL_LIMIT", "abc"), ("MCP_EXEC_MAX_YIELD", "soon"),
                                       ("MCP_EXEC_MAX_YIELD", "-3")])
def test_bad_spill_settings_are_refused_at_start(var, value):
    env = dict(AGENT)
    env[var] = value
    assert_startup_refused(env, var)


def test_a_sandboxed_job_cannot_read_the_spill(raw_server):
    """Attack: a job under MCP_EXEC_SANDBOX=read-only (which may read
    anything else) looks for another job's spilled bytes by the spill file's
    name and through the server's open files.  Control: the same bytes are
    there, readable from outside the sandbox by the same paths."""
    needs_host_files()
    s = agent(raw_server, MCP_EXEC_SANDBOX="read-only")
    before = file_keys(s)
    secret = "SECRET-%s" % uuid.uuid4().hex
    jid = done_job(s, "%s; echo %s; %s" % (PAST_HEAD, secret, SEQ))
    o = out(s, jid, {"grep": secret})
    assert [line for _, line in hit_lines(o["stdout"])] == [secret], short(o)
    files = await_spill_files(s, before, what="a spill file open by the server or named")
    # control: the secret is on disk, and these paths reach it from outside
    assert any(secret.encode() in f.read() for f in files), "control: the secret is in none of %r" % files
    names = " ".join("'%s'" % f.named for f in files if f.named)
    # the server as the job sees it: its parent, and PID 1 on the pid1 target
    server = "/proc/1/fd/*" if TARGET == "pid1" else "/proc/%d/fd/*" % s.host_pid()
    cmd = ("for f in %s /proc/$PPID/fd/* %s; do"
           " [ -f \"$f\" ] && timeout 10 cat \"$f\" 2>/dev/null; done | grep -c %s || true"
           % (names, server, secret))
    r = s.run(cmd, timeout=60)
    assert r.get("stdout", {}).get("data", "").strip() == "0", \
        "a sandboxed job read the spilled secret: %s (files %r)" % (short(r), files)


def test_spill_bytes_bound_and_exact_dropped_bytes(raw_server):
    s = agent(raw_server, MCP_EXEC_SPILL_BYTES=str(MIB), MCP_EXEC_MAX_OUTPUT_BYTES=str(MIB),
              MCP_EXEC_KEEP_HEAD_BYTES="0")
    jid = done_job(s, SEQ)
    total = len(full())
    a = out(s, jid, "all")["stdout"]
    first = a["offset"]
    # the window (1 MiB) and the spill (1 MiB) hold the newest 2 MiB; an
    # implementation may drop spilled bytes in chunks, never keep more
    assert total - 2 * MIB <= first <= total - 2 * MIB + MIB // 2, \
        "oldest byte kept at %d of %d with a 1 MiB window and 1 MiB of spill" % (first, total)
    assert a["truncated"] is True and a["dropped_bytes"] == first, short(a)
    assert a["data"].encode() == full()[first:first + a["bytes"]], "bytes after the drop not exact"
    # 1.0's counting: dropped_bytes is how many of the requested bytes are gone
    o = out(s, jid, {"from": 0, "length": 10})["stdout"]
    assert o["offset"] == first and o["truncated"] is True and o["dropped_bytes"] == 10, short(o)
    o = out(s, jid, {"from": first - 5, "length": 10})["stdout"]
    assert o["offset"] == first and o["truncated"] is True and o["dropped_bytes"] == 5, short(o)
    o = out(s, jid, {"from": first, "length": 10})["stdout"]
    assert o["truncated"] is False and "dropped_bytes" not in o, short(o)
    assert o["data"].encode() == full()[first:first + 10], short(o)
    # a byte that went to the spill and is still in it: readable
    mid = total - MIB - 4096
    o = out(s, jid, {"from": mid, "length": 64})["stdout"]
    assert o["truncated"] is False and o["data"].encode() == full()[mid:mid + 64], short(o)


def test_grep_says_which_matches_cannot_be_seen(raw_server):
    s = agent(raw_server, MCP_EXEC_SPILL_BYTES=str(MIB), MCP_EXEC_MAX_OUTPUT_BYTES=str(MIB),
              MCP_EXEC_KEEP_HEAD_BYTES="0")
    jid = done_job(s, SEQ)
    first = out(s, jid, {"from": 0, "length": 1})["stdout"]["offset"]
    assert first > 0, "the bound must have dropped the oldest bytes"
    res = s.tool_raw("output", {"job_id": jid, "stdout": {"grep": "^1$"}})
    o = s.decode(res)
    assert o["stdout"]["match_count"] == 0 and grep_dropped(o) == first, short(o)
    # the sentence is for the model: prose naming the offset, not a number field
    said = [t for t in prose(o) if re.search(r"\b%d\b" % first, t) and len(t.split()) >= 4]
    assert said, "a sentence must say matches before offset %d cannot be seen: %s" % (first, short(o))
    assert any(t.strip().rstrip(".").count(". ") == 0 for t in said), "not one sentence: %s" % said
    # a search that starts past what is gone lost nothing, and says nothing
    o = out(s, jid, {"grep": "^599999$", "from": first})
    assert hit_lines(o["stdout"]) == [(line_at(599999), "599999")], short(o)
    assert grep_dropped(o) == 0, short(o)
    assert not [t for t in prose(o) if "cannot be seen" in t or "before offset" in t], short(o)


def test_grep_carries_dropped_bytes_0_when_nothing_is_gone(raw_server):
    s = agent(raw_server)
    jid = done_job(s, "echo alpha; echo beta")
    o = out(s, jid, {"grep": "beta"})
    assert hit_lines(o["stdout"]) == [(6, "beta")], short(o)
    assert grep_dropped(o) == 0, short(o)


def test_spill_limit_bounds_the_whole_server(raw_server):
    s = agent(raw_server, MCP_EXEC_SPILL_LIMIT=str(MIB), MCP_EXEC_MAX_OUTPUT_BYTES=str(MIB),
              MCP_EXEC_KEEP_HEAD_BYTES="0")
    total = len(full())
    ids = [done_job(s, SEQ) for _ in range(2)]
    spilled = 0
    for jid in ids:
        a = out(s, jid, "all")["stdout"]
        first = a["offset"]
        assert a["data"].encode() == full()[first:first + a["bytes"]], "bytes of job %s not exact" % jid
        if first:
            assert a["truncated"] is True and a["dropped_bytes"] == first, short(a)
        spilled += max(0, total - MIB - first)
    assert 0 < spilled <= MIB, "%d bytes reachable past the windows with a 1 MiB server-wide spill" % spilled


# ---- removal ---------------------------------------------------------------

def test_spill_files_go_when_a_kept_result_expires(raw_server, tmpdirs):
    needs_host_files()
    d = tmpdirs()
    s = agent(raw_server, MCP_EXEC_SPILL=d, MCP_EXEC_KEPT_SECONDS="3")
    before = file_keys(s, [d])
    r = s.tool("execute", {"command": SEQ}, timeout=60 + SLACK)
    assert r.get("kept") is True, short(r)
    files = await_spill_files(s, before, [d])
    # while kept, the gap is still served from the spill
    g = out(s, r["job_id"], {"from": line_at(300000), "length": 7})["stdout"]
    assert g["data"] == "300000\n" and g["truncated"] is False, short(g)
    wait_until(lambda: not still_there(s, files, [d]), 20 + SLACK,
               lambda: "spill files %r removed after the kept result expired" % still_there(s, files, [d]))
    assert "unknown job_id" in s.tool_err("status", {"job_id": r["job_id"]})


@pytest.mark.parametrize("delivery", ["wait", "kill"])
def test_spill_files_go_when_an_uncut_result_is_delivered(raw_server, tmpdirs, delivery):
    """A result that fits its budget is delivered whole and forgotten at
    once, and its spill with it."""
    needs_host_files()
    d = tmpdirs()
    s = agent(raw_server, MCP_EXEC_SPILL=d)
    before = file_keys(s, [d])
    # The reply carries the result as JSON (newlines escaped) and, in eras with
    # structured output, twice: 4 MB of seq output needs about 10 MB of reply.
    budget = 32 * MIB
    if delivery == "wait":
        jid = s.job(SEQ, close_stdin=True)
        files = await_spill_files(s, before, [d])
        (r,) = s.tool("wait", {"job_ids": [jid], "timeout": 60, "max_reply_bytes": budget}, timeout=90 + SLACK)
    else:
        jid = s.job(SEQ + "; exec sleep 300")
        files = await_spill_files(s, before, [d])
        wait_until(lambda: out(s, jid, {"tail": 1})["stdout"]["data"] == "%d\n" % SEQ_N, 60 + SLACK,
                   "the job writing its last line")
        k = s.tool("kill", {"job_id": jid, "signal": "KILL", "max_reply_bytes": budget}, timeout=60 + SLACK)
        assert k.get("terminated") is True, short(k)
        r = k["result"]
    assert r["stdout"]["total_bytes"] == len(full()) and "omitted" not in r["stdout"], short(r)
    assert r["stdout"]["data"].encode() == full(), "the whole stream, read back from the spill"
    assert not r.get("kept"), short(r)
    wait_until(lambda: not still_there(s, files, [d]), 10 + SLACK,
               lambda: "spill files %r removed once the result was delivered" % still_there(s, files, [d]))


def test_spill_files_go_when_a_finished_job_expires(raw_server, tmpdirs):
    needs_host_files()
    d = tmpdirs()
    s = agent(raw_server, MCP_EXEC_SPILL=d, MCP_EXEC_JOB_TTL="3")
    before = file_keys(s, [d])
    jid = s.job(SEQ, close_stdin=True)
    files = await_spill_files(s, before, [d])
    wait_until(lambda: not still_there(s, files, [d]), 20 + SLACK,
               lambda: "spill files %r removed after the job expired" % still_there(s, files, [d]))
    assert "unknown job_id" in s.tool_err("status", {"job_id": jid})


@pytest.mark.parametrize("how", ["eof", "sigterm"])
@pytest.mark.parametrize("mode", ["dir", "auto"])
def test_spill_files_go_when_the_server_exits(raw_server, tmpdirs, how, mode):
    needs_host_files()
    tmp = tmpdirs()
    env = {"TMPDIR": tmp}
    dirs = [tmp]
    if mode == "dir":
        d = tmpdirs()
        env["MCP_EXEC_SPILL"] = d
        dirs.append(d)
    s = agent(raw_server, **env)
    before = file_keys(s, dirs)
    done_job(s, SEQ)
    running = s.job(SEQ + "; exec sleep 300")
    wait_until(lambda: out(s, running, {"tail": 1})["stdout"]["data"] == "%d\n" % SEQ_N, 60 + SLACK,
               "the running job writing its last line")
    files = await_spill_files(s, before, dirs)
    named_dirs = {os.path.dirname(f.named) for f in files if f.named}
    if how == "eof":
        s.close_stdin()
    else:
        s.send_signal(signal.SIGTERM)
    s.wait_exit(EXIT_WITHIN)
    left = still_there(s, files, dirs)
    assert not left, "spill files left after the server exited (%s): %r" % (how, left)
    if mode == "auto":
        # the server's own directory goes with it
        for nd in named_dirs:
            assert not os.path.exists(nd) or os.path.realpath(nd) == os.path.realpath(tmp), \
                "the spill directory %s outlived the server" % nd
        assert not _files_under(tmp), "files left under the server's TMPDIR: %s" % _files_under(tmp)


# ==========================================================================
# One call per exchange: input with yield_after
# ==========================================================================

# A line REPL: a prompt, an answer per line, "quit" ends it with 0.
REPL = ("echo 'calc ready'; while printf '> '; read -r line; do"
        " case $line in quit) echo bye; exit 0;; esac; echo \"= $line\"; done")


def repl(s):
    jid = s.job(REPL)
    s.poll_output(jid, lambda d: d == "calc ready\n> ")
    return jid


def test_input_returns_the_repls_answer_in_one_call(raw_server):
    s = agent(raw_server)
    jid = repl(s)
    try:
        r, took = timed(s.tool, "input", {"job_id": jid, "data": "2+2\n"}, timeout=30 + SLACK)
        assert took <= PROMPTLY, "input took %.1fs" % took
        assert r["job_id"] == jid and r["state"] == "running", short(r)
        # counted from the write: the banner and the first prompt are not in it
        assert recent(r) == "= 2+2\n> ", short(r)
        assert r.get("waiting_for_input") is True, short(r)
        r = s.tool("input", {"job_id": jid, "data": "6*7\n"}, timeout=30 + SLACK)
        assert recent(r) == "= 6*7\n> ", short(r)
    finally:
        s.cleanup(jid)


def test_input_that_ends_the_job_returns_its_result_delivered(raw_server):
    s = agent(raw_server)
    jid = repl(s)
    r, took = timed(s.tool, "input", {"job_id": jid, "data": "quit\n"}, timeout=30 + SLACK)
    assert took <= PROMPTLY, took
    assert r["state"] == "success" and r["exit_code"] == 0, short(r)
    assert r["stdout"]["data"] == "calc ready\n> bye\n", short(r)
    assert jid not in s.list_ids()
    assert "unknown job_id" in s.tool_err("status", {"job_id": jid})
    # an error exit is delivered the same way, per the capture policy
    jid = s.job("read x; echo \"no: $x\" >&2; exit 3")
    r = s.tool("input", {"job_id": jid, "data": "go\n"}, timeout=30 + SLACK)
    assert r["state"] == "error" and r["exit_code"] == 3, short(r)
    assert r["stderr"]["data"] == "no: go\n", short(r)
    assert "unknown job_id" in s.tool_err("wait", {"job_ids": [jid], "timeout": 0})


def test_input_with_close_returns_the_final_result(raw_server):
    s = agent(raw_server)
    jid = s.job("cat")
    r = s.tool("input", {"job_id": jid, "data": "hello\n", "close": True}, timeout=30 + SLACK)
    assert r["state"] == "success" and r["stdout"]["data"] == "hello\n", short(r)
    assert jid not in s.list_ids()


def test_input_to_a_python_repl(raw_server):
    s = agent(raw_server)
    jid = s.job("exec %s -u -i -q" % python3())
    try:
        s.poll_output(jid, lambda d: d.endswith(">>> "), stream="stderr")
        r = s.tool("input", {"job_id": jid, "data": "print(6*7)\n"}, timeout=30 + SLACK)
        assert r["state"] == "running", short(r)
        assert recent(r) == "42\n", short(r)
        assert recent(r, "stderr") == ">>> ", short(r)
        assert r.get("waiting_for_input") is True, short(r)
        r = s.tool("input", {"job_id": jid, "data": "1/0\n"}, timeout=30 + SLACK)
        assert "ZeroDivisionError" in recent(r, "stderr") and recent(r, "stderr").endswith(">>> "), short(r)
        assert len(recent(r, "stderr").splitlines()) <= 3 and len(recent(r, "stderr").encode()) <= 400, short(r)
    finally:
        s.cleanup(jid)


def test_input_returns_when_the_job_goes_quiet(raw_server):
    """The job answers and then sleeps (not reading, not printing): the
    call returns 0.3 s after the last output, long before yield_after."""
    s = agent(raw_server)
    # one process, no fork between the lines: gaps of 50 ms, never 300
    jid = s.job("exec %s -u -c 'import sys, time\nx = sys.stdin.readline().strip()\n"
                "print(\"one\"); time.sleep(0.05); print(\"two\"); time.sleep(0.05)\n"
                "print(\"three\", x); time.sleep(300)'" % python3())
    try:
        r, took = timed(s.tool, "input", {"job_id": jid, "data": "go\n", "yield_after": 30}, timeout=60 + SLACK)
        assert 0.3 <= took <= PROMPTLY, "input took %.2fs" % took
        assert r["state"] == "running" and recent(r) == "one\ntwo\nthree go\n", short(r)
        assert not r.get("waiting_for_input"), short(r)
    finally:
        s.cleanup(jid)


# Reads one line, then prints "tick" every 20 ms for ever: never quiet for
# 0.3 s, never reading again.  The process is running before the write, so
# its first tick follows the write at once.
TICKER = ("exec %s -u -c 'import sys, time\nsys.stdin.readline()\n"
          "while 1:\n print(\"tick\"); time.sleep(0.02)'")


@pytest.mark.parametrize("yield_after", [None, 1])
def test_input_returns_after_yield_after_from_a_busy_job(raw_server, yield_after):
    """A job that never stops printing: the call returns when yield_after
    (default 2 s under the profile) has passed, with the newest lines."""
    s = agent(raw_server)
    jid = s.job(TICKER % python3())
    args = {"job_id": jid, "data": "go\n"}
    expect = 2.0
    if yield_after is not None:
        args["yield_after"] = expect = yield_after
    try:
        r, took = timed(s.tool, "input", args, timeout=30 + SLACK)
        assert expect - 0.2 <= took <= expect + LATE, "input took %.2fs (yield_after %s)" % (took, expect)
        assert r["state"] == "running", short(r)
        lines = recent(r).splitlines()
        assert 1 <= len(lines) <= 3 and set(lines) == {"tick"}, short(r)
        assert "clamped" not in r, short(r)
    finally:
        s.cleanup(jid)


def test_input_recent_counts_from_the_write_within_1_2_limits(raw_server):
    s = agent(raw_server)
    cmd = ("echo old1; echo old2; read x; for i in 1 2 3 4 5 6; do echo new$i; done; read y;"
           " i=0; while [ $i -lt 3 ]; do printf '%0299d\\n' $i; i=$((i+1)); done; read z")
    jid = s.job(cmd)
    try:
        s.poll_output(jid, lambda d: d == "old1\nold2\n")
        r = s.tool("input", {"job_id": jid, "data": "a\n"}, timeout=30 + SLACK)
        assert recent(r) == "new4\nnew5\nnew6\n", short(r)
        r = s.tool("input", {"job_id": jid, "data": "b\n"}, timeout=30 + SLACK)
        written = "".join("%0299d\n" % i for i in range(3))
        got = recent(r)
        assert got and len(got.encode()) <= 400 and written.endswith(got), short(r)
    finally:
        s.cleanup(jid)


def test_input_without_the_profile_answers_at_once_as_in_1_0(raw_server):
    s = raw_server()
    jid = s.job("read x; sleep 3; echo late; read y")
    try:
        r, took = timed(s.tool, "input", {"job_id": jid, "data": "go\n"})
        assert r == {"job_id": jid, "state": "running"}, r
        assert took < 2.5, "a 1.0 input took %.2fs" % took
    finally:
        s.cleanup(jid)


def test_input_yield_after_is_accepted_without_the_profile(raw_server):
    """The argument is a 1.3 argument everywhere; only its default is the
    profile's."""
    s = raw_server()
    jid = repl(s)
    try:
        r = s.tool("input", {"job_id": jid, "data": "1+1\n", "yield_after": 5}, timeout=30 + SLACK)
        assert r["state"] == "running" and recent(r) == "= 1+1\n> ", short(r)
    finally:
        s.cleanup(jid)


# ==========================================================================
# One call per exchange: wait
# ==========================================================================

PROMPTER = "echo start; sleep 0.5; printf 'Name? '; read n; echo \"hi $n\""


def test_wait_returns_when_a_job_waits_for_input(raw_server):
    s = agent(raw_server)
    sleeper = s.job("exec sleep 300")
    jid = s.job(PROMPTER)
    try:
        res, took = timed(s.tool, "wait", {"job_ids": [sleeper, jid], "timeout": 40}, timeout=60 + SLACK)
        assert took <= 10 + SLACK, "wait held a job waiting for input for %.1fs" % took
        assert [e["job_id"] for e in res] == [sleeper, jid], res
        e = res[1]
        assert e["state"] == "running" and e.get("waiting_for_input") is True, short(res)
        assert recent(e).endswith("Name? "), short(res)
        assert res[0]["state"] == "running" and not res[0].get("waiting_for_input"), short(res)
        # asked again, it is still waiting: the answer comes at once
        res, took = timed(s.tool, "wait", {"job_ids": [jid], "timeout": 40}, timeout=60 + SLACK)
        assert took <= PROMPTLY and res[0].get("waiting_for_input") is True, (took, short(res))
    finally:
        s.cleanup(sleeper, jid)


def test_timed_out_wait_entries_carry_recent_and_elapsed(raw_server):
    s = agent(raw_server)
    t0 = time.monotonic()
    jid = s.job("echo 'step 1'; echo 'step 2'; exec sleep 300")
    quiet = s.job("exec sleep 300")
    try:
        s.poll_output(jid, lambda d: d == "step 1\nstep 2\n")
        res = s.tool("wait", {"job_ids": [jid, quiet], "timeout": 1}, timeout=30 + SLACK)
        ceiling = time.monotonic() - t0 + 0.5
        e, q = res
        assert e["state"] == "running" and recent(e) == "step 1\nstep 2\n", short(res)
        for entry in (e, q):
            el = entry.get("elapsed_s")
            assert isinstance(el, (int, float)) and not isinstance(el, bool), short(res)
            assert 1.0 <= el <= ceiling, "elapsed_s %r, the job is %.1fs old" % (el, ceiling)
        assert not e.get("waiting_for_input"), short(res)
    finally:
        s.cleanup(jid, quiet)


def test_wait_without_the_profile_keeps_1_0_entries_and_timeout(raw_server):
    s = raw_server()
    jid = s.job("echo working; exec sleep 300")
    prompt = s.job("printf 'Name? '; read n")
    try:
        s.poll_output(jid, lambda d: d == "working\n")
        (e,) = s.tool("wait", {"job_ids": [jid], "timeout": 1}, timeout=30 + SLACK)
        assert e == {"job_id": jid, "state": "running"}, e
        # a job waiting for input does not cut a 1.0 wait short
        res, took = timed(s.tool, "wait", {"job_ids": [prompt], "timeout": 3}, timeout=30 + SLACK)
        assert took >= 2.9, "a 1.0 wait returned after %.2fs of its 3" % took
        assert res == [{"job_id": prompt, "state": "running", "waiting_for_input": True}], res
        (r,) = s.tool("wait", {"job_ids": [s.job("true", close_stdin=True)], "timeout": 120}, timeout=30 + SLACK)
        assert "clamped" not in r and r["state"] == "success", r
    finally:
        s.cleanup(jid, prompt)


# ==========================================================================
# One call per exchange: MCP_EXEC_MAX_YIELD
# ==========================================================================

def test_wait_timeout_above_max_yield_is_clamped(raw_server):
    s = agent(raw_server, MCP_EXEC_MAX_YIELD="2")
    jid = s.job("exec sleep 300")
    try:
        res, took = timed(s.tool, "wait", {"job_ids": [jid], "timeout": 30}, timeout=60 + SLACK)
        assert 1.8 <= took <= 2 + LATE, "wait took %.1fs with MCP_EXEC_MAX_YIELD=2" % took
        assert res[0]["state"] == "running", short(res)
        assert clamped_of(res) == {"timeout": 2}, short(res)
        res = s.tool("wait", {"job_ids": [jid], "timeout": 1}, timeout=30 + SLACK)
        assert clamped_of(res) is None, "a timeout under the bound is not clamped: %s" % short(res)
    finally:
        s.cleanup(jid)


def test_execute_yield_after_above_max_yield_is_clamped(raw_server):
    s = agent(raw_server, MCP_EXEC_MAX_YIELD="2")
    r, took = timed(s.tool, "execute", {"command": "exec sleep 300", "yield_after": 30}, timeout=60 + SLACK)
    try:
        assert 1.8 <= took <= 2 + LATE, took
        assert r["state"] == "running" and r.get("yielded") is True, short(r)
        assert r.get("clamped") == {"yield_after": 2}, short(r)
    finally:
        s.cleanup(r.get("job_id"))


def test_input_yield_after_above_max_yield_is_clamped(raw_server):
    s = agent(raw_server, MCP_EXEC_MAX_YIELD="2")
    jid = s.job(TICKER % python3())
    try:
        r, took = timed(s.tool, "input", {"job_id": jid, "data": "go\n", "yield_after": 30}, timeout=60 + SLACK)
        assert 1.8 <= took <= 2 + LATE, took
        assert r["state"] == "running" and r.get("clamped") == {"yield_after": 2}, short(r)
    finally:
        s.cleanup(jid)


def test_max_yield_defaults_to_the_profiles_yield_bound(raw_server):
    """The default bound is the profile's 50 s: a longer timeout says so,
    even when the job ends first."""
    s = agent(raw_server)
    jid = s.job("sleep 0.2", close_stdin=True)
    res, took = timed(s.tool, "wait", {"job_ids": [jid], "timeout": 120}, timeout=60 + SLACK)
    assert took <= PROMPTLY and res[0]["state"] == "success", short(res)
    assert clamped_of(res) == {"timeout": 50}, short(res)
    r = s.tool("execute", {"command": "true", "yield_after": 120}, timeout=60 + SLACK)
    assert r["state"] == "success" and r.get("clamped") == {"yield_after": 50}, short(r)


# ==========================================================================
# One call per exchange: line-boundary cuts
# ==========================================================================

def test_cut_ends_and_starts_at_line_boundaries_with_exact_offsets(raw_server):
    s = agent(raw_server)
    # 20 000 lines of 100 bytes: a byte cut would land inside a line 99 times in 100
    r = s.tool("execute", {"command": "seq -f '%099g' 1 20000"}, timeout=60 + SLACK)
    want = b"".join(b"%099d\n" % i for i in range(1, 20001))
    head, om, tail = check_gap(r["stdout"], total=len(want))
    assert head.encode() == want[:r["stdout"]["bytes"]], "head not exact"
    assert tail["data"].encode() == want[tail["offset"]:], "tail not exact"
    assert head.endswith("\n"), "the head ends inside a line: ...%r" % head[-40:]
    assert tail["offset"] % 100 == 0 and want[tail["offset"] - 1:tail["offset"]] == b"\n", \
        "the tail starts inside a line at %d: %r..." % (tail["offset"], tail["data"][:40])


def test_cut_without_a_nearby_line_boundary_stays_exact(raw_server):
    s = agent(raw_server)
    # lines of 3000 bytes: within the last (first) 1 KiB there is often no boundary
    r = s.tool("execute", {"command": "seq -f '%02999g' 1 400"}, timeout=60 + SLACK)
    want = b"".join(b"%02999d\n" % i for i in range(1, 401))
    head, om, tail = check_gap(r["stdout"], total=len(want))
    assert head.encode() == want[:r["stdout"]["bytes"]], "head not exact"
    assert tail["data"].encode() == want[tail["offset"]:], "tail not exact"
    g = out(s, r["job_id"], {"from": om["offset"], "length": om["bytes"]}, max_reply_bytes=4 * MIB)["stdout"]
    assert g["offset"] == om["offset"] and g["bytes"] == om["bytes"], short(g)


# ==========================================================================
# One call per exchange: the plain view
# ==========================================================================

COLOURED = "printf '\\033[31mred\\033[0m\\n'"
COLOURED_RAW = "\x1b[31mred\x1b[0m\n"


def test_pipe_results_are_plain_under_the_profile_and_raw_on_request(raw_server):
    s = agent(raw_server)
    r = s.tool("execute", {"command": COLOURED})
    sl = r["stdout"]
    assert sl["data"] == "red\n", short(r)
    # offsets and counts stay those of the raw bytes
    assert sl["total_bytes"] == len(COLOURED_RAW), short(r)
    jid = done_job(s, COLOURED)
    o = out(s, jid, "all")["stdout"]
    assert o["data"] == "red\n" and o["total_bytes"] == len(COLOURED_RAW), short(o)
    o = out(s, jid, "all", plain=False)["stdout"]
    assert o["data"] == COLOURED_RAW and o["bytes"] == len(COLOURED_RAW), short(o)
    o = out(s, jid, {"from": 5, "length": 3}, plain=False)["stdout"]
    assert o["data"] == "red" and o["offset"] == 5, short(o)


def test_recent_of_a_pipe_job_is_plain_under_the_profile(raw_server):
    s = agent(raw_server)
    r = s.tool("execute", {"command": "printf '\\033[1mbuilding\\033[0m\\n'; exec sleep 300", "yield_after": 1},
               timeout=30 + SLACK)
    try:
        assert r.get("yielded") is True and recent(r) == "building\n", short(r)
    finally:
        s.cleanup(r.get("job_id"))


def test_pipe_results_stay_raw_without_the_profile(raw_server):
    s = raw_server()
    r = s.tool("execute", {"command": COLOURED})
    assert r["stdout"]["data"] == COLOURED_RAW, short(r)


# ==========================================================================
# One call per exchange: argument hints
# ==========================================================================

def test_unknown_argument_names_the_nearest_ones(raw_server):
    s = agent(raw_server)
    msg = s.tool_err("execute", {"command": "true", "timeout": 5})
    assert ('unknown argument "timeout" for execute; did you mean yield_after (seconds before a running job'
            ' is returned) or time_limit (seconds before it is killed)?') in msg, msg


def test_unknown_argument_without_the_profile_keeps_the_1_1_message(raw_server):
    s = raw_server()
    msg = s.tool_err("execute", {"command": "true", "timeout": 5})
    assert 'unknown argument "timeout" for execute (accepted: ' in msg, msg
    assert "did you mean" not in msg, msg


OBJECT_FORMS = [r'\{\s*"?tail"?\s*:', r'\{\s*"?from"?\s*:', r'\{\s*"?grep"?\s*:']


@pytest.mark.parametrize("word", ["tail", "grep", "from", "last"])
def test_a_bare_word_stream_spec_lists_the_object_forms(raw_server, word):
    s = agent(raw_server)
    jid = done_job(s, "echo x")
    msg = s.tool_err("output", {"job_id": jid, "stdout": word})
    assert "invalid" in msg, msg
    for form in OBJECT_FORMS:
        assert re.search(form, msg), "%s missing from: %s" % (form, msg)
