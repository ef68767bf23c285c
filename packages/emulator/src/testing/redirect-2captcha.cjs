"use strict";
/**
 * Node preload: `node --require ./redirect-2captcha.cjs app.js`.
 *
 * When TWOCAPTCHA_REDIRECT (e.g. http://127.0.0.1:18090) is set, every https.request /
 * https.get to host 2captcha.com (or www.2captcha.com) is sent over plain http to that
 * address instead, keeping method, headers, path and query (a path in TWOCAPTCHA_REDIRECT is
 * used as a prefix). Other hosts are untouched. Without the variable this file does nothing.
 * It prints nothing: the requests carry API keys.
 */
const http = require("node:http");
const https = require("node:https");

const REDIRECTED_HOSTS = new Set(["2captcha.com", "www.2captcha.com"]);

function install(target) {
  const base = new URL(target);
  if (base.protocol !== "http:") throw new Error("TWOCAPTCHA_REDIRECT must be an http:// URL");
  const prefix = base.pathname.replace(/\/+$/, "");
  const originalRequest = https.request;
  const originalGet = https.get;

  function urlToOptions(url) {
    return {
      protocol: url.protocol,
      hostname: url.hostname,
      port: url.port,
      path: `${url.pathname}${url.search}`,
      auth: url.username ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined,
    };
  }

  /** Returns http.request arguments for a 2captcha.com request, or null to leave it alone. */
  function rewrite(args) {
    let options;
    let callback;
    let rest = args;
    let fromUrl = {};
    if (typeof rest[0] === "string" || rest[0] instanceof URL) {
      fromUrl = urlToOptions(new URL(String(rest[0])));
      rest = rest.slice(1);
    }
    if (typeof rest[0] === "function") {
      callback = rest[0];
    } else {
      options = rest[0];
      callback = rest[1];
    }
    const merged = Object.assign({}, fromUrl, options || {});
    const host = String(merged.hostname || merged.host || "")
      .replace(/:\d+$/, "")
      .toLowerCase();
    if (!REDIRECTED_HOSTS.has(host)) return null;

    const path = merged.path || `${merged.pathname || "/"}${merged.search || ""}`;
    const out = Object.assign({}, merged, {
      protocol: "http:",
      hostname: base.hostname.replace(/^\[|\]$/g, ""),
      host: undefined,
      port: base.port || 80,
      path: `${prefix}${path}`,
      // an https.Agent cannot carry plain http; use the default http agent
      agent: undefined,
      servername: undefined,
    });
    return callback ? [out, callback] : [out];
  }

  https.request = function request(...args) {
    const redirected = rewrite(args);
    return redirected ? http.request(...redirected) : originalRequest.apply(this, args);
  };
  https.get = function get(...args) {
    const redirected = rewrite(args);
    if (!redirected) return originalGet.apply(this, args);
    const req = http.request(...redirected);
    req.end();
    return req;
  };
}

if (process.env.TWOCAPTCHA_REDIRECT) install(process.env.TWOCAPTCHA_REDIRECT);
