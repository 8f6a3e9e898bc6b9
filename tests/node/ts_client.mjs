// Drives the official TypeScript SDK client against `fake-mcp serve`, using its /_fake/ control API
// to drop the session mid-run, and prints one JSON line: what the client did at each step.
//
//   node tests/node/ts_client.mjs http://127.0.0.1:PORT/mcp
//
// Every step is bounded: the whole run is cut at 30 s (exit 2) so a hang fails the test with a message.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const deadline = setTimeout(() => {
  console.error("ts_client.mjs: did not finish within 30 s");
  process.exit(2);
}, 30_000);

const url = new URL(process.argv[2]);
const control = (name) => new URL(`/_fake/${name}`, url);

async function post(name, body) {
  const response = await fetch(control(name), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body ?? {}),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, body: await response.json() };
}

function describe(error) {
  return { name: error?.name, code: error?.code, message: String(error?.message ?? error) };
}

async function attempt(call) {
  try {
    const result = await call();
    return { ok: true, text: result?.content?.[0]?.text ?? null };
  } catch (error) {
    return { ok: false, error: describe(error) };
  }
}

const report = {};
const client = new Client({ name: "ts-driver", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(url);
await client.connect(transport);
report.session_at_connect = transport.sessionId ?? null;
report.tools = (await client.listTools()).tools.map((tool) => tool.name);
report.call_before_drop = await attempt(() => client.callTool({ name: "echo", arguments: { text: "before" } }));

report.drop = await post("drop_session", { session_id: transport.sessionId });
report.call_after_drop = await attempt(() => client.callTool({ name: "echo", arguments: { text: "after" } }));
report.second_call_after_drop = await attempt(() => client.callTool({ name: "echo", arguments: { text: "again" } }));
report.session_after_drop = transport.sessionId ?? null;

await client.close();
report.session_after_close = transport.sessionId ?? null;
clearTimeout(deadline);
console.log(JSON.stringify(report));
