import { expect, test } from "bun:test";
import { allowedHost, hostNameOf, isLoopback, sameOrigin, secureCookie } from "./guard.ts";

test("hostNameOf: the Host header's name without its port, IPv6 without brackets; malformed is nothing", () => {
  expect(hostNameOf("127.0.0.1:8090")).toBe("127.0.0.1");
  expect(hostNameOf("Console.Example")).toBe("console.example");
  expect(hostNameOf("[::1]:8090")).toBe("::1");
  expect(hostNameOf("[::1]")).toBe("::1");
  for (const bad of [
    undefined,
    "",
    "a b",
    "evil.example:8090/x",
    "user@evil.example",
    "::1:8090",
    "evil.example:123456",
  ])
    expect(hostNameOf(bad)).toBeUndefined();
});

test("allowedHost: only the console's names, whatever the port", () => {
  const names = ["localhost", "127.0.0.1", "::1", "console.internal"];
  for (const ok of ["localhost:8090", "127.0.0.1", "[::1]:1", "CONSOLE.internal:443"])
    expect(allowedHost(ok, names)).toBe(true);
  for (const no of [
    undefined,
    "evil.example:8090",
    "console.internal.evil.example",
    "127.0.0.2:8090",
    "localhost.:8090",
  ])
    expect(allowedHost(no, names)).toBe(false);
});

test("sameOrigin: Origin must be http(s)://<Host>, port included; without it Sec-Fetch-Site same-origin, or a Bearer script", () => {
  const host = "127.0.0.1:8090";
  const f = (origin: string | undefined, fetchSite?: string, bearer = false) =>
    sameOrigin({ origin, fetchSite, host, bearer });
  expect(f("http://127.0.0.1:8090")).toBe(true);
  expect(f("https://127.0.0.1:8090")).toBe(true);
  for (const o of [
    "http://127.0.0.1:8091",
    "http://localhost:8090",
    "http://evil.example",
    "null",
    "file://",
    "http://127.0.0.1:8090/console",
    "garbage",
  ])
    expect(f(o)).toBe(false);
  // A foreign Origin is refused even with a token.
  expect(f("http://evil.example", undefined, true)).toBe(false);
  expect(f(undefined, "same-origin")).toBe(true);
  // The console's own page under Referrer-Policy no-referrer: Origin null, Sec-Fetch-Site same-origin.
  expect(f("null", "same-origin")).toBe(true);
  expect(f("null", undefined, true)).toBe(false);
  expect(f("http://127.0.0.1:8090", "cross-site")).toBe(false);
  expect(f("http://127.0.0.1:8090", "same-site")).toBe(false);
  for (const s of ["same-site", "cross-site", "none"]) expect(f(undefined, s, true)).toBe(false);
  expect(f(undefined)).toBe(false);
  expect(f(undefined, undefined, true)).toBe(true);
  expect(sameOrigin({ origin: "http://127.0.0.1:8090", fetchSite: undefined, host: undefined, bearer: false })).toBe(
    false,
  );
});

test("secureCookie: Secure beyond loopback, on TLS, or when always; not on a loopback listener", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "localhost"]) expect(isLoopback(h)).toBe(true);
  for (const h of ["0.0.0.0", "::", "10.0.0.5", "console.example"]) expect(isLoopback(h)).toBe(false);
  expect(secureCookie({ consoleHost: "127.0.0.1", mode: "auto", protocol: "http:" })).toBe(false);
  expect(secureCookie({ consoleHost: "127.0.0.1", mode: "auto", protocol: "https:" })).toBe(true);
  expect(secureCookie({ consoleHost: "127.0.0.1", mode: "always", protocol: "http:" })).toBe(true);
  expect(secureCookie({ consoleHost: "0.0.0.0", mode: "auto", protocol: "http:" })).toBe(true);
  expect(secureCookie({ consoleHost: "10.0.0.5", mode: "auto", protocol: "http:" })).toBe(true);
});
