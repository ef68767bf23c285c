// The SSRF policy of task callbacks, case by case (docs/security.md lists which test proves what).
import { describe, expect, test } from "bun:test";
import {
  type CallbackPolicy,
  callbackHostKey,
  checkCallbackUrl,
  checkResolvedAddresses,
  STRICT_CALLBACK_POLICY,
} from "./callback-url.ts";
import { classifyIp, parseIPv6 } from "./ip.ts";

const STRICT = STRICT_CALLBACK_POLICY;
const DEV: CallbackPolicy = { allowHttp: true, allowPrivate: true };
const HTTP_ONLY: CallbackPolicy = { allowHttp: true, allowPrivate: false };

const refused = (url: string, policy: CallbackPolicy = STRICT) => {
  const r = checkCallbackUrl(url, policy);
  return r.ok ? undefined : r.reason;
};

describe("the WHATWG URL parser normalizes every IPv4 spelling before the check (we rely on it)", () => {
  const spellings: Array<[string, string]> = [
    ["https://2130706433/", "127.0.0.1"], // decimal
    ["https://0x7f000001/", "127.0.0.1"], // hex
    ["https://0x7f.0x0.0x0.0x1/", "127.0.0.1"], // hex per part
    ["https://0177.0.0.1/", "127.0.0.1"], // octal
    ["https://017700000001/", "127.0.0.1"], // octal, one number
    ["https://127.1/", "127.0.0.1"], // short form
    ["https://127.0.1/", "127.0.0.1"],
    ["https://127.0.0.1./", "127.0.0.1"], // trailing dot
    ["https://127.000.000.001/", "127.0.0.1"], // zero padded
    ["https://%31%32%37.0.0.1/", "127.0.0.1"], // percent-encoded
    ["https://０x7f000001/", "127.0.0.1"], // full-width digits (IDNA mapping)
    ["https://0/", "0.0.0.0"],
    ["https://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]"],
    ["https://[0:0:0:0:0:ffff:7f00:1]/", "[::ffff:7f00:1]"],
  ];
  for (const [url, host] of spellings) {
    test(`${url} -> ${host}`, () => {
      expect(new URL(url).hostname).toBe(host);
      expect(refused(url)).toMatch(/^must not point to (a loopback|an unspecified) address/);
    });
  }
});

describe("refused by the strict policy", () => {
  const cases: Array<[string, string, RegExp]> = [
    ["loopback", "https://127.0.0.1/hook", /loopback address \(127\.0\.0\.1\)/],
    ["loopback, other /8 address", "https://127.8.9.10:8443/hook", /loopback/],
    ["IPv6 loopback", "https://[::1]/hook", /loopback address \(::1\)/],
    ["RFC 1918 10/8", "https://10.0.0.5/hook", /private network/],
    ["RFC 1918 172.16/12", "https://172.31.255.255/hook", /private network/],
    ["RFC 1918 192.168/16", "https://192.168.1.1/hook", /private network/],
    ["link-local (cloud metadata)", "https://169.254.169.254/latest/meta-data/", /link-local/],
    ["CGNAT 100.64/10", "https://100.64.0.1/hook", /carrier-grade NAT/],
    ["CGNAT, top of the range", "https://100.127.255.254/hook", /carrier-grade NAT/],
    ["ULA fc00::/7", "https://[fd12:3456:789a::1]/hook", /unique local/],
    ["ULA fc00::", "https://[fc00::1]/hook", /unique local/],
    ["IPv6 link-local", "https://[fe80::1]/hook", /link-local/],
    ["IPv4 multicast", "https://224.0.0.1/hook", /multicast/],
    ["IPv6 multicast", "https://[ff02::1]/hook", /multicast/],
    ["unspecified IPv4", "https://0.0.0.0/hook", /unspecified/],
    ["unspecified IPv6", "https://[::]/hook", /unspecified/],
    ["broadcast", "https://255.255.255.255/hook", /reserved/],
    ["documentation range", "https://192.0.2.10/hook", /reserved/],
    ["IPv4-mapped loopback", "https://[::ffff:127.0.0.1]/hook", /loopback address \(::ffff:7f00:1\)/],
    ["IPv4-mapped private", "https://[::ffff:10.1.2.3]/hook", /private network/],
    ["IPv4-mapped metadata", "https://[::ffff:169.254.169.254]/hook", /link-local/],
    ["NAT64 of loopback", "https://[64:ff9b::7f00:1]/hook", /loopback/],
    ["6to4 of a private address", "https://[2002:c0a8:101::1]/hook", /private network/],
    ["decimal IPv4", "https://2130706433/hook", /loopback/],
    ["hex IPv4", "https://0x7f000001/hook", /loopback/],
    ["octal IPv4", "https://0177.0.0.1/hook", /loopback/],
    ["short IPv4", "https://127.1/hook", /loopback/],
    ["hex metadata address", "https://0xa9fea9fe/hook", /link-local/],
    ["localhost", "https://localhost/hook", /loopback address$/],
    ["LOCALHOST", "https://LOCALHOST:8443/hook", /loopback/],
    ["localhost.", "https://localhost./hook", /loopback/],
    ["*.localhost", "https://api.localhost/hook", /loopback/],
    ["single-label name", "https://metadata/computeMetadata/v1/", /private network/],
    ["*.internal", "https://metadata.google.internal/", /private network/],
    ["*.local", "https://printer.local/", /private network/],
    ["user and password", "https://user:pass@hooks.example.com/hook", /user name or password/],
    ["user only", "https://user@hooks.example.com/hook", /user name or password/],
    ["password only", "https://:pass@hooks.example.com/hook", /user name or password/],
    ["userinfo hiding the real host", "https://127.0.0.1:80@hooks.example.com/", /user name or password/],
    ["http", "http://hooks.example.com/hook", /must be an https URL/],
    ["ftp", "ftp://hooks.example.com/hook", /must be an https URL/],
    ["javascript:", "javascript:alert(1)", /must be an https URL/],
    ["file:", "file:///etc/passwd", /must be an https URL/],
    ["not a URL", "hooks.example.com/hook", /must be an https URL/],
    ["too long", `https://hooks.example.com/${"a".repeat(2048)}`, /at most 2048/],
  ];
  for (const [name, url, reason] of cases) test(name, () => expect(refused(url)).toMatch(reason));

  test("not a string", () => expect(checkCallbackUrl(42).ok).toBe(false));
  test("a reason never repeats the URL's path or query", () => {
    expect(refused("https://127.0.0.1/hook?token=s3cret")).not.toContain("s3cret");
    expect(refused("https://user:s3cret@hooks.example.com/")).not.toContain("s3cret");
  });
});

describe("accepted", () => {
  const ok: Array<[string, string, CallbackPolicy]> = [
    ["a public https host", "https://hooks.example.com/cb?x=1", STRICT],
    ["a public IPv4 literal", "https://93.184.216.34/cb", STRICT],
    ["just outside 172.16/12", "https://172.32.0.1/cb", STRICT],
    ["just outside 100.64/10", "https://100.128.0.1/cb", STRICT],
    ["a public IPv6 literal", "https://[2606:4700::1111]/cb", STRICT],
    ["IPv4-mapped public", "https://[::ffff:93.184.216.34]/cb", STRICT],
    ["http with WEBHOOK_ALLOW_HTTP", "http://hooks.example.com/cb", HTTP_ONLY],
    ["127.0.0.1 over http with both dev flags", "http://127.0.0.1:8123/hook", DEV],
    ["localhost with both dev flags", "http://localhost:8123/hook", DEV],
    ["10/8 with WEBHOOK_ALLOW_PRIVATE", "http://10.1.2.3/hook", DEV],
    ["[::1] with WEBHOOK_ALLOW_PRIVATE", "http://[::1]:9/hook", DEV],
  ];
  for (const [name, url, policy] of ok)
    test(name, () => expect(checkCallbackUrl(url, policy)).toMatchObject({ ok: true }));

  test("an IP literal comes back as the address to connect to; a name does not", () => {
    const lit = checkCallbackUrl("http://0x7f000001:9/h", DEV);
    expect(lit.ok && lit.target.literal).toEqual({ address: "127.0.0.1", family: 4 });
    const v6 = checkCallbackUrl("http://[::1]:9/h", DEV);
    expect(v6.ok && v6.target).toMatchObject({ host: "::1", literal: { address: "::1", family: 6 } });
    const name = checkCallbackUrl("https://Hooks.Example.com./cb");
    expect(name.ok && name.target.host).toBe("hooks.example.com");
    expect(name.ok && name.target.literal).toBeUndefined();
  });
});

describe("WEBHOOK_ALLOW_PRIVATE never opens link-local, multicast, unspecified or reserved addresses, nor userinfo", () => {
  for (const url of [
    "http://169.254.169.254/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://240.0.0.1/",
    "http://u:p@127.0.0.1/",
  ]) {
    test(url, () => expect(refused(url, DEV)).toBeDefined());
  }
  test("WEBHOOK_ALLOW_HTTP alone does not open private addresses", () =>
    expect(refused("http://127.0.0.1/", HTTP_ONLY)).toMatch(/loopback/));
});

describe("resolved addresses (the send-time check against DNS rebinding)", () => {
  test("every answer must be allowed: one private answer refuses the host", () => {
    expect(
      checkResolvedAddresses([
        { address: "93.184.216.34", family: 4 },
        { address: "127.0.0.1", family: 4 },
      ]),
    ).toEqual({ ok: false, reason: "the host name resolves to a loopback address (127.0.0.1)" });
    expect(checkResolvedAddresses([{ address: "::ffff:10.0.0.1", family: 6 }]).ok).toBe(false);
    expect(checkResolvedAddresses([{ address: "fe80::1%eth0", family: 6 }])).toMatchObject({
      ok: false,
      reason: expect.stringContaining("link-local"),
    });
    expect(checkResolvedAddresses([]).ok).toBe(false);
    expect(checkResolvedAddresses([{ address: "not-an-ip", family: 4 }]).ok).toBe(false);
  });
  test("all public: the first answer is the address to connect to", () => {
    expect(
      checkResolvedAddresses([
        { address: "2606:4700::1111", family: 6 },
        { address: "93.184.216.34", family: 4 },
      ]),
    ).toEqual({
      ok: true,
      address: "2606:4700::1111",
      family: 6,
      addresses: [
        { address: "2606:4700::1111", family: 6 },
        { address: "93.184.216.34", family: 4 },
      ],
    });
  });
  test("WEBHOOK_ALLOW_PRIVATE lets 127.0.0.1 through", () => {
    expect(checkResolvedAddresses([{ address: "127.0.0.1", family: 4 }], DEV)).toMatchObject({
      ok: true,
      address: "127.0.0.1",
      family: 4,
    });
  });
});

describe("address parsing and classes", () => {
  test("IPv6 forms", () => {
    expect(parseIPv6("::1")).toEqual([...Array(15).fill(0), 1]);
    expect(parseIPv6("::ffff:1.2.3.4")).toEqual([...Array(10).fill(0), 0xff, 0xff, 1, 2, 3, 4]);
    expect(parseIPv6("[2001:db8::1]")!.slice(0, 4)).toEqual([0x20, 0x01, 0x0d, 0xb8]);
    for (const bad of ["1::2::3", "1:2:3:4:5:6:7:8:9", "12345::", "::1.2.3", ":1", "1:2:3:4:5:6:7", "g::1"])
      expect(parseIPv6(bad)).toBeUndefined();
  });
  test("classes at the edges of their ranges", () => {
    expect(classifyIp("9.255.255.255")).toBe("public");
    expect(classifyIp("10.0.0.0")).toBe("private");
    expect(classifyIp("11.0.0.0")).toBe("public");
    expect(classifyIp("100.63.255.255")).toBe("public");
    expect(classifyIp("172.15.255.255")).toBe("public");
    expect(classifyIp("172.16.0.0")).toBe("private");
    expect(classifyIp("192.169.0.0")).toBe("public");
    expect(classifyIp("223.255.255.255")).toBe("public");
    expect(classifyIp("::ffff:0:0")).toBe("unspecified");
    expect(classifyIp("::2")).toBe("unspecified"); // IPv4-compatible 0.0.0.2
    expect(classifyIp("3fff::1")).toBe("public");
    expect(classifyIp("4000::1")).toBe("reserved"); // outside 2000::/3
    expect(classifyIp("2001:db8::1")).toBe("reserved");
    expect(classifyIp("2001::1")).toBe("reserved"); // Teredo
    expect(classifyIp("hooks.example.com")).toBeUndefined();
  });
  test("the per-host cap key is host[:port]", () => {
    expect(callbackHostKey("https://Hooks.Example.com:8443/a?b")).toBe("hooks.example.com:8443");
    expect(callbackHostKey("http://127.0.0.1:80/")).toBe("127.0.0.1");
    expect(callbackHostKey("nope")).toBe("");
  });
});
