import { describe, expect, it } from "vitest";
import { Router, type Route } from "../../src/http/router.js";

const handler = async () => new Response("ok");
const routes: Route[] = [
  { method: "POST", path: /^\/chat\/completions\/?$/, handler },
  { method: "GET", path: /^\/models\/(?<id>.+)$/, handler },
];

describe("router", () => {
  const router = new Router("https://app.example/api/", routes);
  it("answers under the base URL with and without /v1", () => {
    expect(router.relativePath(new URL("https://app.example/api/v1/chat/completions"))).toBe("/chat/completions");
    expect(router.relativePath(new URL("https://app.example/api/chat/completions"))).toBe("/chat/completions");
    expect(router.match("POST", new URL("https://app.example/api/v1/chat/completions")).route).toBe(routes[0]);
    expect(router.match("POST", new URL("https://app.example/api/chat/completions")).route).toBe(routes[0]);
  });
  it("leaves other origins and paths alone", () => {
    expect(router.relativePath(new URL("https://other.example/api/v1/models"))).toBeNull();
    expect(router.relativePath(new URL("https://app.example/apix/v1/models"))).toBeNull();
    expect(router.relativePath(new URL("https://app.example/index.html"))).toBeNull();
    expect(router.relativePath(new URL("https://app.example/api/v1x/models"))).toBe("/v1x/models");
  });
  it("extracts and decodes parameters, and checks the method", () => {
    const found = router.match("GET", new URL("https://app.example/api/v1/models/alpha3%3A8b-instruct-q8_0"));
    expect(found.route).toBe(routes[1]);
    expect(found.route && found.params).toEqual({ id: "alpha3:8b-instruct-q8_0" });
    expect(router.match("GET", new URL("https://app.example/api/v1/chat/completions")).route).toBeNull();
  });
});
