/**
 * A streamed chat completion's chunks put back together as the `chat.completion` they amount to:
 * each choice's content, tool calls (their arguments joined by index) and log probabilities, its
 * finish reason, and the usage chunk's usage. Work is linear in the chunks.
 */
import type { ChatCompletion, ChatCompletionChunk } from "../../core/wire/chat-completion.js";

type Choice = ChatCompletion["choices"][number];
type ChunkChoice = ChatCompletionChunk["choices"][number];
type ToolCall = NonNullable<Choice["message"]["tool_calls"]>[number];
type TokenLogprob = NonNullable<NonNullable<Choice["logprobs"]>["content"]>[number];

class ChoiceAssembly {
  readonly #content: string[] = [];
  readonly #calls = new Map<number, { id: string; name: string; arguments: string[] }>();
  #logprobs: TokenLogprob[] | null = null;
  #finishReason: Choice["finish_reason"] = "stop";

  add(choice: ChunkChoice): void {
    const { delta } = choice;
    if (typeof delta.content === "string") this.#content.push(delta.content);
    for (const call of delta.tool_calls ?? []) {
      const known = this.#calls.get(call.index) ?? { id: "", name: "", arguments: [] };
      if (call.id) known.id = call.id;
      if (call.function?.name) known.name += call.function.name;
      if (call.function?.arguments) known.arguments.push(call.function.arguments);
      this.#calls.set(call.index, known);
    }
    if (choice.logprobs?.content) (this.#logprobs ??= []).push(...choice.logprobs.content);
    if (choice.finish_reason) this.#finishReason = choice.finish_reason;
  }

  choice(index: number): Choice {
    const calls = [...this.#calls.entries()].sort(([first], [second]) => first - second);
    const toolCalls: ToolCall[] = calls.map(([, call]) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: call.arguments.join("") },
    }));
    return {
      index,
      message: {
        role: "assistant",
        content: this.#content.length || !toolCalls.length ? this.#content.join("") : null,
        refusal: null,
        ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
      },
      logprobs: this.#logprobs ? { content: this.#logprobs, refusal: null } : null,
      finish_reason: this.#finishReason,
    };
  }
}

export class CompletionAssembly {
  #envelope: Omit<ChatCompletionChunk, "choices" | "usage" | "object"> | undefined;
  readonly #choices = new Map<number, ChoiceAssembly>();
  #usage: ChatCompletion["usage"] | null = null;

  add(chunk: ChatCompletionChunk): void {
    if (!this.#envelope) {
      const { choices: _choices, usage: _usage, object: _object, ...envelope } = chunk;
      this.#envelope = envelope;
    }
    if (chunk.usage) this.#usage = chunk.usage;
    for (const choice of chunk.choices ?? []) {
      const assembly = this.#choices.get(choice.index) ?? new ChoiceAssembly();
      assembly.add(choice);
      this.#choices.set(choice.index, assembly);
    }
  }

  /** The completion the chunks so far amount to; null before the first chunk. */
  completion(): (Omit<ChatCompletion, "usage"> & { usage: ChatCompletion["usage"] | null }) | null {
    if (!this.#envelope) return null;
    const choices = [...this.#choices.entries()]
      .sort(([first], [second]) => first - second)
      .map(([index, assembly]) => assembly.choice(index));
    return { ...this.#envelope, object: "chat.completion", choices, usage: this.#usage };
  }
}
