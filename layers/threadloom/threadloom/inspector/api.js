// The HTTP API client: same origin, optional bearer token (kept in sessionStorage), errors in words.

const TOKEN_KEY = "threadloom.token";

/** An answer outside 2xx, carrying the API's error envelope `{"error": {"code", "message"}}`. */
export class ApiError extends Error {
  constructor(status, code, message, path) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.path = path;
  }

  /** One sentence a person can act on. */
  get words() {
    if (this.status === 0) return this.message;
    return `${this.message} (HTTP ${this.status}${this.code ? `, ${this.code}` : ""})`;
  }
}

let unauthorizedHandler = null;

export const auth = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  },
  set token(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
  /** Called once per 401 answer (the deployed API wants a bearer token). */
  onUnauthorized(handler) {
    unauthorizedHandler = handler;
  },
};

function envelope(status, payload, fallback) {
  const error = payload && typeof payload === "object" ? payload.error : null;
  if (error && typeof error === "object") return [String(error.code || ""), String(error.message || fallback)];
  // API Gateway's own refusals (no token, throttling) are `{"message": "..."}`.
  if (payload && typeof payload === "object" && typeof payload.message === "string") return ["", payload.message];
  if (typeof payload === "string" && payload.trim()) return ["", payload.trim().slice(0, 300)];
  return ["", fallback];
}

/** Call the API; resolves with the parsed JSON body, rejects with an ApiError. */
export async function request(method, path, body, { signal } = {}) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  const token = auth.token;
  if (token) headers.authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (error) {
    if (error && error.name === "AbortError") throw error;
    throw new ApiError(0, "network", `Could not reach the API (${method} ${path}): ${error.message || error}`, path);
  }
  const text = await response.text();
  let payload = null;
  try {
    payload = text ? JSON.parse(text) : null;
  } catch {
    payload = text;
  }
  if (!response.ok) {
    const [code, message] = envelope(response.status, payload, response.statusText || "Request failed");
    const error = new ApiError(response.status, code, message, path);
    if (response.status === 401 && unauthorizedHandler) unauthorizedHandler(error);
    throw error;
  }
  return payload;
}

const enc = encodeURIComponent;

/** The endpoints the inspector uses, one function each. */
/** The `field` items of every page of a list endpoint, following `nextCursor` to the end. */
async function everyPage(path, field) {
  const items = [];
  let cursor = null;
  do {
    const page = await request("GET", cursor ? `${path}?cursor=${enc(cursor)}` : path);
    items.push(...page[field]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

export const api = {
  listSessions: (cursor, limit = 50) =>
    request("GET", `/sessions?limit=${limit}${cursor ? `&cursor=${enc(cursor)}` : ""}`),
  createSession: (name) => request("POST", "/sessions", { name }),
  getSession: (id) => request("GET", `/sessions/${enc(id)}`),
  renameSession: (id, name) => request("PATCH", `/sessions/${enc(id)}`, { name }),
  deleteSession: (id) => request("DELETE", `/sessions/${enc(id)}`),
  fork: (id, atMessageId, name) => request("POST", `/sessions/${enc(id)}/fork`, { atMessageId, name }),
  history: (id, { leafId, cursor, limit = 200 } = {}, options) => {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    else if (leafId) query.set("leafId", leafId);
    return request("GET", `/sessions/${enc(id)}/history?${query}`, undefined, options);
  },
  leaf: (id) => request("GET", `/sessions/${enc(id)}/leaf`),
  /** Every child of a message: the endpoint pages them, so this follows `nextCursor` to the end. */
  children: async (id, messageId) => ({
    messages: await everyPage(`/sessions/${enc(id)}/messages/${enc(messageId)}/branches`, "messages"),
  }),
  branchPoints: (id) => request("GET", `/sessions/${enc(id)}/branch-points`),
  append: (id, message, parentId) =>
    request("POST", `/sessions/${enc(id)}/messages`, parentId ? { message, parentId } : { message }),
  searchAll: (q, limit = 50) => request("GET", `/search?q=${enc(q)}&limit=${limit}`),
  searchSession: (id, q) => request("GET", `/sessions/${enc(id)}/search?q=${enc(q)}`),
  compactions: async (id) => ({ compactions: await everyPage(`/sessions/${enc(id)}/compactions`, "compactions") }),
  originals: async (id, compactionId) => ({
    messages: await everyPage(`/sessions/${enc(id)}/compactions/${enc(compactionId)}/originals`, "messages"),
  }),
  compact: (id) => request("POST", `/sessions/${enc(id)}/compact`, {}),
  split: (id, summary, name) => request("POST", `/sessions/${enc(id)}/split`, name ? { summary, name } : { summary }),
  blocks: (id) => request("GET", `/sessions/${enc(id)}/context`),
  writeBlock: (id, label, content, mode) =>
    request("PUT", `/sessions/${enc(id)}/context/${enc(label)}`, { content, mode }),
  /** One page of a block's versions, newest first; `nextCursor` continues with older ones. */
  blockHistory: (id, label, { cursor, limit = 20 } = {}) => {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    return request("GET", `/sessions/${enc(id)}/context/${enc(label)}/history?${query}`);
  },
  /** Make `version` current again (a new version); `basedOnVersion` refuses it when the block moved on. */
  revertBlock: (id, label, version, basedOnVersion) =>
    request("POST", `/sessions/${enc(id)}/context/${enc(label)}/revert`, { version, basedOnVersion }),
  /** One page of a searchable block's entries (the tenant's), in key order. */
  knowledgeEntries: (label, { cursor, limit = 20 } = {}) => {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    return request("GET", `/knowledge/${enc(label)}?${query}`);
  },
  deleteKnowledgeEntry: (label, key) =>
    request("DELETE", `/knowledge/${enc(label)}/entry?${new URLSearchParams({ key })}`),
  contextWindow: (id) => request("GET", `/sessions/${enc(id)}/context-window`),
  refreshPrompt: (id) => request("POST", `/sessions/${enc(id)}/system-prompt/refresh`),
  tools: (id) => request("GET", `/sessions/${enc(id)}/tools`),
  callTool: (id, name, input) => request("POST", `/sessions/${enc(id)}/tools/${enc(name)}`, { input }),
  status: (id) => request("GET", `/sessions/${enc(id)}/status`),
  /** Queue a reflection of the conversation (202 `queued`), or its outcome when it ran at once (200). */
  reflect: (id) => request("POST", `/sessions/${enc(id)}/reflect`, {}),
  /** One page of the memory edits reflection proposed, oldest first; `status` null lists every status. */
  proposals: (id, { status = null, cursor = null, limit = 20 } = {}) => {
    const query = new URLSearchParams({ limit: String(limit) });
    if (status) query.set("status", status);
    if (cursor) query.set("cursor", cursor);
    return request("GET", `/sessions/${enc(id)}/proposals?${query}`);
  },
  approveProposal: (id, proposalId) => request("POST", `/sessions/${enc(id)}/proposals/${enc(proposalId)}/approve`),
  rejectProposal: (id, proposalId) => request("POST", `/sessions/${enc(id)}/proposals/${enc(proposalId)}/reject`),
};

/** Words for any error (ApiError or anything thrown). */
export function describe(error) {
  if (error instanceof ApiError) return error.words;
  return String((error && error.message) || error);
}
