"""Random-weight BERT in ONNX, laid out as transformers.js loads a model, for npm run bench:embeddings.

transformers.js runs the same shapes as the benchmark's GGUF files (scripts/test-gguf.mjs):
`onnx/model.onnx` (fp32, its `dtype: "fp32"`) and `onnx/model_quantized.onnx` (weights dynamically
quantized to int8 by ONNX Runtime's own quantizer, its `dtype: "q8"`), beside a `config.json`.
bench/embeddings.mjs writes the tokenizer files. Needs torch, transformers, onnx and onnxruntime.

Usage: python3 bench/onnx-model.py <out-dir> <layers> <hidden> <heads> <feed-forward> <vocabulary> <positions>
"""

import os
import sys

import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from transformers import BertConfig, BertModel


class LastHiddenState(torch.nn.Module):
    """BertModel's last hidden state from (input_ids, attention_mask, token_type_ids), the inputs transformers.js feeds."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state


def main():
    out, layers, hidden, heads, feed_forward, vocabulary, positions = sys.argv[1:8]
    torch.manual_seed(20_261_202)
    config = BertConfig(
        vocab_size=int(vocabulary),
        hidden_size=int(hidden),
        num_hidden_layers=int(layers),
        num_attention_heads=int(heads),
        intermediate_size=int(feed_forward),
        max_position_embeddings=int(positions),
    )
    model = LastHiddenState(BertModel(config).eval())
    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    config.save_pretrained(out)
    ids = torch.ones(2, 16, dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    names = ["input_ids", "attention_mask", "token_type_ids"]
    fp32 = os.path.join(out, "onnx", "model.onnx")
    torch.onnx.export(
        model,
        (ids, ids, torch.zeros_like(ids)),
        fp32,
        input_names=names,
        output_names=["last_hidden_state"],
        dynamic_axes={name: axes for name in [*names, "last_hidden_state"]},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(fp32, os.path.join(out, "onnx", "model_quantized.onnx"), weight_type=QuantType.QInt8)


if __name__ == "__main__":
    main()
