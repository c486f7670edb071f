/**
 * OpenAI's error body: `{error: {message, type, code, param}}`.
 */
import { z } from "zod";

export const errorBodySchema = z.strictObject({
  error: z.strictObject({
    message: z.string(),
    type: z.string(),
    code: z.string().nullable(),
    param: z.string().nullable(),
  }),
});
