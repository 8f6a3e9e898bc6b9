// Drives the official TypeScript SDK client's OAuth through `fake-mcp serve --auth`, headlessly: the provider's
// redirectToAuthorization fetches the authorize URL and keeps the code from its redirect, the script hands it to
// transport.finishAuth() and connects again (the SDK's own pattern). Then it meets an expired token: the control
// API scripts expire_tokens on the next tools/call. Prints one JSON line: what the client did at each step.
//
//   node tests/node/ts_oauth_client.mjs http://127.0.0.1:PORT/mcp
//
// Every step is bounded: the whole run is cut at 30 s (exit 2) so a hang fails the test with a message.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const deadline = setTimeout(() => {
  console.error("ts_oauth_client.mjs: did not finish within 30 s");
  process.exit(2);
}, 30_000);

const url = new URL(process.argv[2]);
const REDIRECT = "http://127.0.0.1:9/callback"; // never reached: the code is read from the Location header

class HeadlessProvider {
  constructor() {
    this.client = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.code = undefined;
    this.authorizations = 0;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return {
      client_name: "ts-oauth-driver",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_post",
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(information) {
    this.client = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  async redirectToAuthorization(authorizationUrl) {
    this.authorizations += 1;
    const response = await fetch(authorizationUrl, { redirect: "manual", signal: AbortSignal.timeout(10_000) });
    const location = response.headers.get("location");
    this.code = location ? new URL(location).searchParams.get("code") : null;
  }
}

async function control(name, body) {
  const response = await fetch(new URL(`/_fake/${name}`, url), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body ?? {}),
    signal: AbortSignal.timeout(10_000),
  });
  return response.status;
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

const provider = new HeadlessProvider();
const report = {};

// 1. The first connect meets the 401: the SDK registers, then "redirects" (the provider takes the code).
let transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
let client = new Client({ name: "ts-oauth-driver", version: "1.0.0" });
try {
  await client.connect(transport);
  report.first_connect = "connected";
} catch (error) {
  report.first_connect = error instanceof UnauthorizedError ? "unauthorized" : describe(error);
}
report.code_received = Boolean(provider.code);

// 2. finishAuth exchanges the code (PKCE verifier, resource); a new transport connects with the token.
if (provider.code) {
  await transport.finishAuth(provider.code);
  transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  client = new Client({ name: "ts-oauth-driver", version: "1.0.0" });
  await client.connect(transport);
}
report.session = transport.sessionId ?? null;
report.has_refresh_token = Boolean(provider.saved?.refresh_token);
report.call = await attempt(() => client.callTool({ name: "echo", arguments: { text: "authorized" } }));

// 3. The next call meets an expired token (401): what does the client do?
report.fault_status = await control("faults", { method: "tools/call", expire_tokens: true });
report.call_after_expiry = await attempt(() => client.callTool({ name: "echo", arguments: { text: "expired" } }));
report.session_after_expiry = transport.sessionId ?? null;
report.authorizations = provider.authorizations;

await client.close();
clearTimeout(deadline);
console.log(JSON.stringify(report));
