/** Why a file gave no text, in the words of a vector store file's `last_error`. */
export class UnreadableFile extends Error {
  readonly code: "unsupported_file" | "invalid_file";

  constructor(code: "unsupported_file" | "invalid_file", message: string) {
    super(message);
    this.code = code;
  }
}
