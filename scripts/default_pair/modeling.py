"""Qwen3-MoE and Qwen3 (dense) causal language models in plain torch, written to match Hugging
Face transformers' modeling_qwen3_moe.py and modeling_qwen3.py: the same computation and the same
parameter names, so that state_dict() is the checkpoint's tensor list."""
import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass
class Shape:
    """The fields of config.json that decide the computation."""
    family: str  # "qwen3_moe" or "qwen3"
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    dense_inter: int = 0  # qwen3's MLP
    experts: int = 0
    top_k: int = 0
    moe_inter: int = 0
    norm_topk_prob: bool = True
    tie_embeddings: bool = False
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_positions: int = 2048

    @property
    def is_moe(self):
        return self.family == "qwen3_moe"


class RMSNorm(nn.Module):
    """Qwen3RMSNorm: x / rms(x) in float32, times weight."""

    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_tables(shape, length, device=None):
    """cos and sin [length, head_dim] of the default rotary embedding (no scaling)."""
    exponents = torch.arange(0, shape.head_dim, 2, dtype=torch.int64).float() / shape.head_dim
    inv_freq = 1.0 / (shape.rope_theta ** exponents)
    positions = torch.arange(length, dtype=torch.float32)
    freqs = torch.outer(positions, inv_freq)
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos().to(device), angles.sin().to(device)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    """Qwen3Attention: per-head RMSNorm on q and k before RoPE, grouped-query heads, no bias."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        self.q_proj = nn.Linear(s.hidden, s.heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden, s.kv_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.heads * s.head_dim, s.hidden, bias=False)
        self.q_norm = RMSNorm(s.head_dim, s.rms_norm_eps)
        self.k_norm = RMSNorm(s.head_dim, s.rms_norm_eps)

    def forward(self, x, cos, sin, mask):
        s = self.s
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, s.heads, s.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, s.kv_heads, s.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # repeat_kv: query head h reads key/value head h // (heads / kv_heads).
        group = s.heads // s.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (s.head_dim ** -0.5) + mask
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        out = (probs @ v).transpose(1, 2).reshape(b, t, s.heads * s.head_dim)
        return self.o_proj(out)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)); Qwen3MLP and Qwen3MoeMLP (one expert)."""

    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class SparseMoE(nn.Module):
    """Qwen3MoeSparseMoeBlock: softmax router over all experts, the top-k kept (renormalised to
    sum 1 with norm_topk_prob), each token's expert outputs summed with those weights."""

    def __init__(self, s):
        super().__init__()
        self.s = s
        self.gate = nn.Linear(s.hidden, s.experts, bias=False)
        self.experts = nn.ModuleList(MLP(s.hidden, s.moe_inter) for _ in range(s.experts))

    def forward(self, x):
        b, t, h = x.shape
        flat = x.reshape(-1, h)
        probs = torch.softmax(self.gate(flat).float(), dim=-1)
        weights, chosen = torch.topk(probs, self.s.top_k, dim=-1)
        if self.s.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        # Group the (token, slot) pairs by expert: one matmul chain per expert.
        slots = chosen.reshape(-1)
        order = torch.argsort(slots, stable=True)
        rows = order // self.s.top_k
        counts = torch.bincount(slots, minlength=self.s.experts).tolist()
        outs = []
        for e, part in enumerate(torch.split(flat[rows], counts)):
            if counts[e]:
                outs.append(self.experts[e](part))
        y = torch.cat(outs) * weights.reshape(-1)[order].unsqueeze(-1)
        out = torch.zeros_like(flat).index_add_(0, rows, y)
        return out.view(b, t, h), (probs, chosen)


class DecoderLayer(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.self_attn = Attention(s)
        self.mlp = SparseMoE(s) if s.is_moe else MLP(s.hidden, s.dense_inter)
        self.input_layernorm = RMSNorm(s.hidden, s.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(s.hidden, s.rms_norm_eps)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        y = self.mlp(self.post_attention_layernorm(x))
        if isinstance(y, tuple):
            return x + y[0], y[1]
        return x + y, None


class Backbone(nn.Module):
    """Qwen3MoeModel / Qwen3Model: the "model." prefix of every tensor name."""

    def __init__(self, s):
        super().__init__()
        self.embed_tokens = nn.Embedding(s.vocab, s.hidden)
        self.layers = nn.ModuleList(DecoderLayer(s) for _ in range(s.layers))
        self.norm = RMSNorm(s.hidden, s.rms_norm_eps)


class CausalLM(nn.Module):
    """Qwen3MoeForCausalLM / Qwen3ForCausalLM. forward(ids [B, T]) returns logits [B, T, vocab]
    and, for MoE, the router's (probabilities, chosen experts) of every layer."""

    def __init__(self, s, init_std=0.02):
        super().__init__()
        self.shape = s
        self.model = Backbone(s)
        self.lm_head = None if s.tie_embeddings else nn.Linear(s.hidden, s.vocab, bias=False)
        self._init(init_std)

    def _init(self, std):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=std)

    def forward(self, ids):
        t = ids.shape[1]
        cos, sin = rope_tables(self.shape, t, ids.device)
        mask = torch.full((t, t), -math.inf, device=ids.device).triu(1)
        x = self.model.embed_tokens(ids)
        routing = []
        for layer in self.model.layers:
            x, r = layer(x, cos, sin, mask)
            if r is not None:
                routing.append(r)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return x @ head.t(), routing

    def tensors(self):
        """The checkpoint's tensors by Hugging Face name (a tied lm_head is not written)."""
        return {name: p.detach() for name, p in self.state_dict().items()}


def load_balancing_loss(routing, experts, top_k):
    """transformers' load_balancing_loss_func over all layers: experts * sum over slots and
    experts of (share of tokens sent) * (mean router probability). 1 * top_k when uniform."""
    probs = torch.cat([p for p, _ in routing])
    chosen = torch.cat([c for _, c in routing])
    sent = F.one_hot(chosen, experts).float().mean(dim=0)  # [top_k, experts]
    return experts * (sent * probs.mean(dim=0).unsqueeze(0)).sum()


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
