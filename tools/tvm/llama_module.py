"""A small Llama-architecture model written the way MLC LLM writes it, for the exporter's tests.

relax.frontend.nn, weights as one packed tuple (`param_mode="packed"`), fused QKV, RoPE and
attention in TVM's `nn.llm` paged KV cache (the TIR version, `TIRPagedKVCache`), RMSNorm, SwiGLU,
and MLC's entry functions: embed, prefill, decode, batch_prefill, batch_decode and
create_paged_kv_cache. Tiny sizes: the point is the shape of the module, not the model.

    from llama_module import LlamaConfig, llama_module
    mod, named_params = llama_module(LlamaConfig(), tvm.target.Target("webgpu"))
"""

import dataclasses

from tvm import relax as rx
from tvm import te
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn.llm.kv_cache import PagedKVCache, RopeMode, TIRPagedKVCache


@dataclasses.dataclass
class LlamaConfig:
    vocab_size: int = 64
    hidden_size: int = 32
    intermediate_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    rope_theta: int = 10000
    rms_norm_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads


class LlamaFFN(nn.Module):
    def __init__(self, c: LlamaConfig):
        self.gate_up_proj = nn.Linear(c.hidden_size, 2 * c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        gate, up = nn.op.split(self.gate_up_proj(x), 2, axis=-1)
        return self.down_proj(nn.op.silu(gate) * up)


class LlamaAttention(nn.Module):
    def __init__(self, c: LlamaConfig):
        self.c = c
        heads = c.num_attention_heads + 2 * c.num_key_value_heads
        self.qkv_proj = nn.Linear(c.hidden_size, heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)

    def forward(self, x, paged_kv_cache: PagedKVCache, layer_id: int):
        c = self.c
        b, s, _ = x.shape
        qkv = nn.op.reshape(self.qkv_proj(x), (b, s, c.num_attention_heads + 2 * c.num_key_value_heads,
                                              c.head_dim))
        out = paged_kv_cache.attention_with_fused_qkv(
            layer_id, qkv, c.num_attention_heads, sm_scale=c.head_dim ** -0.5)
        return self.o_proj(nn.op.reshape(out, (b, s, c.num_attention_heads * c.head_dim)))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c: LlamaConfig):
        self.input_layernorm = nn.RMSNorm(c.hidden_size, -1, c.rms_norm_eps, bias=False)
        self.self_attn = LlamaAttention(c)
        self.post_attention_layernorm = nn.RMSNorm(c.hidden_size, -1, c.rms_norm_eps, bias=False)
        self.mlp = LlamaFFN(c)

    def forward(self, x, paged_kv_cache, layer_id):
        x = x + self.self_attn(self.input_layernorm(x), paged_kv_cache, layer_id)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, c: LlamaConfig):
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([LlamaDecoderLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = nn.RMSNorm(c.hidden_size, -1, c.rms_norm_eps, bias=False)

    def forward(self, x, paged_kv_cache):
        for i, layer in enumerate(self.layers):
            x = layer(x, paged_kv_cache, i)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c: LlamaConfig, target):
        self.c, self.target = c, target
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def embed(self, input_ids):
        return self.model.embed_tokens(input_ids)

    def batch_forward(self, input_embeds, paged_kv_cache, logit_positions=None):
        h = self.model(input_embeds, paged_kv_cache)
        if logit_positions is not None:
            h = nn.op.take(h, logit_positions, axis=1)
        return self.lm_head(h)

    def prefill(self, input_embed, paged_kv_cache):
        def last(x):  # (b, s, d) -> (b, 1, d): the last position, as MLC's `index`
            b, s, d = x.shape
            return te.compute((b, 1, d), lambda i, _, k: x[i, s - 1, k], name="index")

        h = self.model(input_embed, paged_kv_cache)
        h = nn.op.tensor_expr_op(last, name_hint="index", args=[h])
        return self.lm_head(h), paged_kv_cache

    def decode(self, input_embed, paged_kv_cache):
        return self.lm_head(self.model(input_embed, paged_kv_cache)), paged_kv_cache

    def batch_prefill(self, input_embeds, logit_positions, paged_kv_cache):
        return self.batch_forward(input_embeds, paged_kv_cache, logit_positions), paged_kv_cache

    def batch_decode(self, input_embeds, paged_kv_cache):
        return self.batch_forward(input_embeds, paged_kv_cache), paged_kv_cache

    def create_paged_kv_cache(self, max_batch_size, max_total_seq_len, prefill_chunk_size,
                              page_size, support_sliding_window):
        c = self.c
        return TIRPagedKVCache(
            attn_kind="mha",
            max_batch_size=max_batch_size,
            max_total_seq_len=max_total_seq_len,
            prefill_chunk_size=prefill_chunk_size,
            page_size=page_size,
            support_sliding_window=support_sliding_window,
            layer_partition=rx.ShapeExpr([0, c.num_hidden_layers]),
            num_hidden_layers=c.num_hidden_layers,
            num_attention_heads=c.num_attention_heads,
            num_key_value_heads=c.num_key_value_heads,
            qk_head_dim=c.head_dim,
            v_head_dim=c.head_dim,
            mla_original_qk_head_dim=0,
            mla_original_v_head_dim=0,
            rope_mode=RopeMode.NORMAL,
            rope_scale=1,
            rope_theta=c.rope_theta,
            rope_scaling={},
            rope_ext_factors=rx.prim_value(0),
            rotary_dim=c.head_dim,
            enable_disaggregation=False,
            dtype="float32",
            target=self.target,
        )

    def get_default_spec(self):
        d = self.c.hidden_size
        packed = {"param_mode": "packed", "effect_mode": "none"}
        cache = nn.spec.Object(object_type=PagedKVCache)
        return {
            "embed": {"input_ids": nn.spec.Tensor(["seq_len"], "int32"), "$": packed},
            "prefill": {"input_embed": nn.spec.Tensor([1, "seq_len", d], "float32"),
                        "paged_kv_cache": cache, "$": packed},
            "decode": {"input_embed": nn.spec.Tensor([1, 1, d], "float32"),
                       "paged_kv_cache": cache, "$": packed},
            "batch_prefill": {"input_embeds": nn.spec.Tensor([1, "seq_len", d], "float32"),
                              "logit_positions": nn.spec.Tensor(["batch_size"], "int32"),
                              "paged_kv_cache": cache, "$": packed},
            "batch_decode": {"input_embeds": nn.spec.Tensor(["batch_size", 1, d], "float32"),
                             "paged_kv_cache": cache, "$": packed},
            "create_paged_kv_cache": {
                "max_batch_size": int, "max_total_seq_len": int, "prefill_chunk_size": int,
                "page_size": int, "support_sliding_window": int,
                "$": {"param_mode": "none", "effect_mode": "none"}},
        }


def llama_module(config, target):
    """The Relax module and its named parameters, for `target` (the KV cache's kernels are
    chosen per target, so the WebGPU and the llvm build each need their own module)."""
    model = LlamaForCausalLM(config, target)
    model.to("float32")
    mod, named, _ext = model.export_tvm(spec=model.get_default_spec(), allow_extern=True)
    return mod, named


def seeded_params(named, seed=5):
    """The seeded weights of the exported package (and of tools/tvm/llama_trace.py's CPU build):
    RMSNorm scales near 1, every other weight normal / sqrt(fan in)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    params = {}
    for name, p in named:
        shape = [int(d) for d in p.shape]
        params[name] = (1 + 0.1 * rng.standard_normal(shape) if name.endswith("norm.weight")
                        else rng.standard_normal(shape) / np.sqrt(shape[-1])).astype("float32")
    return params


def export(out_dir, config=LlamaConfig(), seed=5):
    """Exports the model for WebGPU into `out_dir` with seeded weights; TVM's llvm build of the
    same model (its KV cache built for llvm) gives reference.json its `embed` cases."""
    import numpy as np
    import tvm

    from export_webgpu import ShapeInput, export_package

    mod, named = llama_module(config, tvm.target.Target("webgpu"))
    cpu_mod, _ = llama_module(config, tvm.target.Target("llvm"))
    params = seeded_params(named, seed)
    ids = [np.array(x, "int32") for x in ([3], [1, 5, 9, 63])]
    # ShapeTuples in (as MLC's engine passes the sizes), an object out (TVM's KV cache): the
    # case records what the object was.
    cache = ("create_paged_kv_cache", tuple(ShapeInput(v) for v in (1, 64, 16, 16, 0)))
    export_package(mod, params, out_dir, reference_mod=cpu_mod, name="llama-tiny",
                   reference_inputs=[*[("embed", (x,)) for x in ids], cache])


if __name__ == "__main__":
    import sys

    from export_webgpu import Unsupported

    if len(sys.argv) != 2:
        raise SystemExit("usage: llama_module.py OUT_DIR")
    try:
        export(sys.argv[1])
    except Unsupported as e:
        raise SystemExit(f"llama_module.py: cannot export: {e}")
