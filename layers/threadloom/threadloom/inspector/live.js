// Live session status: the WebSocket channel when the server offers one, else polling over HTTP.
//
// Feature detection, so nothing is attempted that would fail: the page reads /openapi.json once;
// if it lists GET /sessions/{sessionId}/status, the status endpoint exists, and the WebSocket
// (same protocol everywhere) is at the URL /inspector/config.json names (the local server: /ws).
// Without them the page polls the context-window breakdown, which carries the same figures.

import { api, auth, request } from "./api.js";

const POLL_MS = 1500;
const LIVE_PROTOCOL = "threadloom.live";
const TOKEN_PROTOCOL_PREFIX = "threadloom.token.";
const STATUS_PATH = "/sessions/{sessionId}/status";
let featuresPromise = null;

/** What this server offers: `{status: bool, websocketUrl: string|null}` (asked once per page load). */
export function features() {
  if (!featuresPromise) {
    featuresPromise = Promise.all([
      request("GET", "/openapi.json").catch(() => ({ paths: {} })),
      request("GET", "/inspector/config.json").catch(() => ({})),
    ]).then(([openapi, config]) => {
      const status = Boolean(openapi && openapi.paths && openapi.paths[STATUS_PATH]);
      let websocketUrl = null;
      if (status && config && config.websocketUrl) {
        const url = new URL(config.websocketUrl, location.href);
        if (url.protocol === "http:") url.protocol = "ws:";
        if (url.protocol === "https:") url.protocol = "wss:";
        websocketUrl = url.toString();
      }
      return { status, websocketUrl };
    });
  }
  return featuresPromise;
}

/**
 * The subprotocols a WebSocket offers: the live protocol, and the token as `threadloom.token.<jwt>` when there is
 * one. Never `?token=` in the URL, which proxies and access logs record. The server answers `threadloom.live`.
 */
export function liveProtocols(token) {
  const protocols = [LIVE_PROTOCOL];
  // A JWT (base64url parts and dots) is a valid subprotocol name as it is; anything else is not sent.
  if (token && /^[A-Za-z0-9._~-]+$/.test(token)) protocols.push(TOKEN_PROTOCOL_PREFIX + token);
  return protocols;
}

/**
 * Watch one session. `onStatus({phase, tokenEstimate, tokenThreshold, compacted?, error?, channel})`
 * fires on every update; `onChanged(change)` when the conversation or context changed.
 * Returns a function that stops watching.
 */
export function watchSession(sessionId, { onStatus, onChanged }) {
  let stopped = false;
  let socket = null;
  let timer = 0;
  let last = null;

  function emit(status) {
    if (!stopped) onStatus(status);
  }

  async function pollOnce(useStatus) {
    try {
      if (useStatus) {
        const status = await api.status(sessionId);
        const signature = `${status.tokenEstimate}|${status.phase}|${status.leafId || ""}|${JSON.stringify(status.latestRequest || status.compaction || null)}|${(status.staleBlocks || []).join(",")}`;
        emit({ ...status, channel: "polling" });
        if (last !== null && signature !== last) onChanged("status");
        last = signature;
      } else {
        const win = await api.contextWindow(sessionId);
        const signature = `${win.totalTokens}|${win.historyMessages}`;
        emit({ phase: "idle", tokenEstimate: win.totalTokens, tokenThreshold: win.threshold, channel: "polling" });
        if (last !== null && signature !== last) onChanged("append");
        last = signature;
      }
    } catch (error) {
      emit({ error, channel: "polling" });
    }
  }

  function startPolling(useStatus) {
    const tick = async () => {
      if (stopped) return;
      if (!document.hidden) await pollOnce(useStatus);
      if (!stopped) timer = setTimeout(tick, POLL_MS);
    };
    tick();
  }

  function startSocket(url, useStatus) {
    let opened = false;
    socket = new WebSocket(url, liveProtocols(auth.token));
    socket.addEventListener("open", () => {
      opened = true;
      socket.send(JSON.stringify({ action: "subscribe", sessionId }));
    });
    socket.addEventListener("message", (event) => {
      let data;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      if (data.sessionId && data.sessionId !== sessionId) return;
      if (data.type === "subscribed") emit({ ...(data.status || {}), channel: "websocket", subscribed: true });
      else if (data.type === "session_status") {
        emit({ ...data, channel: "websocket" });
        onChanged("status");
      } else if (data.type === "session_error") emit({ phase: "idle", compactionError: data.error, channel: "websocket" });
      else if (data.type === "session_changed") onChanged(data.change || "append");
      else if (data.type === "error") {
        emit({ error: new Error(`Live channel refused the subscription: ${data.error}`), channel: "websocket" });
      }
    });
    socket.addEventListener("close", () => {
      socket = null;
      if (stopped) return;
      // A dropped or refused channel falls back to polling (same figures, a little later).
      emit({ channel: "polling", notice: opened ? "Live channel closed; polling instead." : "Live channel unavailable; polling instead." });
      startPolling(useStatus);
    });
  }

  features().then(({ status, websocketUrl }) => {
    if (stopped) return;
    if (websocketUrl && "WebSocket" in window) startSocket(websocketUrl, status);
    else startPolling(status);
  });

  return () => {
    stopped = true;
    clearTimeout(timer);
    if (socket) {
      try {
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ action: "unsubscribe", sessionId }));
        socket.close();
      } catch {
        /* already closing */
      }
    }
  };
}
