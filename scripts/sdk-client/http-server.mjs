// Starts mcp-exec on the HTTP transport for the HTTP client checks
// (http-check.mjs here and in ../ts2-client): `mcp-exec --listen
// 127.0.0.1:0` with a bearer token, reading the address it chose from the
// line it prints on stderr. No dependencies.
import { spawn } from "node:child_process";

export const TOKEN = "secret";

// startServer starts a server with env added to ours (without our MCP_EXEC_*
// variables: the server refuses unknown ones such as MCP_EXEC_BIN) and
// returns {url, stop, stderr}; url is the MCP endpoint. stderr() is what the
// server has written so far, for failure messages.
export async function startServer(bin, env = {}) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("MCP_EXEC_")));
  const child = spawn(bin, ["--listen", "127.0.0.1:0"], {
    env: { ...base, MCP_EXEC_TOKEN: TOKEN, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "serving MCP on" line within 5 s; stderr: ${err}`)), 5000);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      err += chunk;
      const m = err.match(/serving MCP on (http:\/\/\S+\/mcp)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening; stderr: ${err}`));
    });
  });
  child.removeAllListeners("exit");
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
      await exited;
      clearTimeout(timer);
    }
  };
  return { url: new URL(url), stop, stderr: () => err };
}

// recordingFetch wraps fetch and records, per POST, the JSON-RPC method (or
// "response"/"notification"), the HTTP status and the response content type.
export function recordingFetch(log) {
  return async (url, init) => {
    const res = await fetch(url, init);
    let what = init?.method ?? "GET";
    if (what === "POST" && typeof init.body === "string") {
      try {
        const m = JSON.parse(init.body);
        what = m.method ? `${m.method}${m.id === undefined ? "" : `#${m.id}`}` : `response#${m.id}`;
      } catch {}
    }
    log.push({ what, status: res.status, type: res.headers.get("content-type") ?? "" });
    return res;
  };
}

// pidGone waits up to ms for the process pid to be gone.
export async function pidGone(pid, ms) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch (e) {
      if (e.code === "ESRCH") return true;
      throw e;
    }
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}
