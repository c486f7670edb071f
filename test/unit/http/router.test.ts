import { describe, expect, it } from "vitest";
import { endsLikeEndpoint } from "../../../src/endpoints/routes.js";
import { endsInRoute, Router, type Route } from "../../../src/http/router.js";

const handler = async () => new Response("ok");
const routes: Route<unknown, Response>[] = [
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
  it("tells an endpoint's path from an app's own under any base path, before the base URL is known", () => {
    for (const path of [
      "/openai/v1/chat/completions",
      "/api/completions",
      "/v1/models",
      "/x/y/models/alpha3%3A8b",
      "/openai/v1/model/info",
      "/models/",
    ]) {
      expect(endsLikeEndpoint(path), path).toBe(true);
    }
    for (const path of ["/", "/index.html", "/assets/app.js", "/v1", "/openai/v1/", "/chat", "/modelsx"])
      expect(endsLikeEndpoint(path), path).toBe(false);
    expect(endsInRoute("/a/b", [/^\/b$/])).toBe(true);
    expect(endsInRoute("/a/b", [/^\/a$/])).toBe(false);
  });
  it("looks at the last segments only: a path of a million slashes is answered at once", () => {
    const started = performance.now();
    expect(endsLikeEndpoint("/".repeat(1_000_000) + "index.html")).toBe(false);
    expect(performance.now() - started).toBeLessThan(200);
  });
});
