"""End-to-end tests of what reaches the model under the agent profile (wire 1.4).

Job environment defaults for a reader; carriage-return redraws shown as
their last frame; capture with grep; highlights of the lines a cut result
did not show; and the sentence an until that found nothing says about an
empty stream.  Secrets masking is a separate piece and not tested here.

How the page is read where it leaves room:

- Everything here is the agent profile's (or a setting's); the compat
  profile is checked to answer as before for each piece.
- The environment defaults are set only where neither the server's
  environment nor the call's env names the variable; an empty value in env
  removes the variable from the job's environment (MCP_EXEC_JOB_ENV_DEFAULTS
  on; off keeps 1.0's env, where "" sets an empty value).
"""

import json

from tests.helpers import SLACK  # noqa: F401 (used by the later sections)

AGENT = {"MCP_EXEC_PROFILE": "agent"}
# The server's own environment without the variables the defaults give, so
# what a job sees is the defaults' doing (a terminal's TERM would win).
CLEAN = {"NO_COLOR": None, "FORCE_COLOR": None, "PAGER": None, "GIT_PAGER": None, "TERM": None}
# printenv, not $TERM: bash sets TERM=dumb for itself (not exported) when unset.
SHOW_ENV = 'for v in NO_COLOR PAGER GIT_PAGER TERM FORCE_COLOR; do echo "$v=$(printenv $v || echo unset)"; done'


def shown_env(srv, **kw):
    """The five variables as a job of srv sees them."""
    r = srv.run(SHOW_ENV, **kw)
    assert r["state"] == "success", r
    return dict(line.split("=", 1) for line in r["stdout"]["data"].replace("\r", "").splitlines())


# ==========================================================================
# 1. The job environment defaults
# ==========================================================================

def test_agent_jobs_get_the_environment_defaults(make_server):
    s = make_server(env=dict(AGENT, **CLEAN))
    assert shown_env(s) == {"NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb",
                            "FORCE_COLOR": "unset"}
    # A terminal job keeps the TERM its terminal has (none here): no dumb.
    assert shown_env(s, tty=True)["TERM"] == "unset"


def test_the_call_and_the_server_win_and_empty_removes(make_server):
    s = make_server(env=dict(AGENT, **dict(CLEAN, PAGER="less", FORCE_COLOR="1")))
    got = shown_env(s, env={"GIT_PAGER": "more", "TERM": ""})
    # The server's PAGER and FORCE_COLOR win (no NO_COLOR), the call's
    # GIT_PAGER wins, and an empty TERM removes it.
    assert got == {"NO_COLOR": "unset", "PAGER": "less", "GIT_PAGER": "more", "TERM": "unset",
                   "FORCE_COLOR": "1"}, got
    got = shown_env(s, env={"PAGER": "", "FORCE_COLOR": ""})
    assert got == {"NO_COLOR": "1", "PAGER": "unset", "GIT_PAGER": "cat", "TERM": "dumb",
                   "FORCE_COLOR": "unset"}, got


def test_defaults_off_and_compat_keep_the_environment(make_server):
    for env in (dict(AGENT, MCP_EXEC_JOB_ENV_DEFAULTS="off", **CLEAN), dict(CLEAN)):
        s = make_server(env=env)
        assert shown_env(s, env={"PAGER": ""}) == {"NO_COLOR": "unset", "PAGER": "", "GIT_PAGER": "unset",
                                                   "TERM": "unset", "FORCE_COLOR": "unset"}, env
        s.close()


def test_execute_says_so_under_the_profile_only(make_server):
    def execute_text(s):
        (tool,) = [t for t in s.result("tools/list")["tools"] if t["name"] == "execute"]
        return tool["description"]
    assert "NO_COLOR=1" in execute_text(make_server(env=AGENT))
    assert "NO_COLOR" not in execute_text(make_server(env=dict(AGENT, MCP_EXEC_JOB_ENV_DEFAULTS="off")))
    assert "NO_COLOR" not in execute_text(make_server())
