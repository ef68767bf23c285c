import { expect, test } from "bun:test";
import { hasPassword, redactUrl } from "./redact-url.ts";

test("redactUrl hides the userinfo of every URL in a text, and nothing else", () => {
  expect(redactUrl("postgres://app:s3cret@db.internal:5432/pipeline")).toBe("postgres://***@db.internal:5432/pipeline");
  expect(redactUrl("postgresql://only-user@db/x")).toBe("postgresql://***@db/x");
  expect(redactUrl("nats://u:p%40ss@h1:4222,nats://v:w@h2:4222")).toBe("nats://***@h1:4222,nats://***@h2:4222");
  expect(redactUrl("connect failed: https://k:v@provider.example/res.php?x=a@b (timeout)")).toBe(
    "connect failed: https://***@provider.example/res.php?x=a@b (timeout)",
  );
  for (const plain of ["postgres://db:5432/app", "http://127.0.0.1:8080/x?mail=a@b", "no url here, a@b", "mailto:a@b"])
    expect(redactUrl(plain)).toBe(plain);
});

test("hasPassword", () => {
  expect(hasPassword("postgres://u:p@h/d")).toBe(true);
  expect(hasPassword("postgres://u@h/d")).toBe(false);
  expect(hasPassword("not a url")).toBe(false);
});
