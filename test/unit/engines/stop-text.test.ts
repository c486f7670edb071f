/** Stop sequences over streamed pieces: OpenAI's cut, and work linear in the reply. */
import { describe, expect, it } from "vitest";
import { StopScanner } from "../../../src/engines/stop-text.js";

function run(stops: string[], pieces: string[]) {
  const scanner = new StopScanner(stops);
  let text = "";
  for (const piece of pieces) {
    const result = scanner.push(piece);
    text += result.text;
    if (result.stopped) return { text, stopped: true };
  }
  return { text: text + scanner.flush(), stopped: false };
}

describe("StopScanner", () => {
  it("ends before a stop sequence split across pieces, and never sends its start early", () => {
    const scanner = new StopScanner(["END"]);
    expect(scanner.push("abc E")).toEqual({ text: "abc ", stopped: false });
    expect(scanner.push("N")).toEqual({ text: "", stopped: false });
    expect(scanner.push("Dxyz")).toEqual({ text: "", stopped: true });
  });

  it("sends held text that turned out not to be a stop sequence, and keeps every character", () => {
    expect(run(["END"], ["a", "E", "N", "x", "EN"])).toEqual({ text: "aENxEN", stopped: false });
    expect(run(["\n\n", "##"], ["one\n", "#two", "\n", "\n"])).toEqual({ text: "one\n#two", stopped: true });
    expect(run([], ["a", "b"])).toEqual({ text: "ab", stopped: false });
  });

  it("takes time linear in the reply: 200,000 pieces that each could start a stop sequence", () => {
    const started = performance.now();
    const result = run(
      ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"],
      Array.from({ length: 200_000 }, () => "a"),
    );
    expect(result.text).toHaveLength(200_000);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
