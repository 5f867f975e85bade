"""The training loops: the target on next-token cross-entropy plus the router's load-balancing
loss, the draft on the KL divergence to the target's distribution (on windows of the training
text and on the target's own greedy continuations of such windows); and the held-out figures."""
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import modeling


class Batches:
    """Random windows of seq + 1 tokens from one token array, drawn from a seeded generator: the
    same seed gives the same batches."""

    def __init__(self, ids, batch, seq, seed):
        self.ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))
        self.batch, self.seq = batch, seq
        self.gen = torch.Generator().manual_seed(seed)
        assert len(self.ids) > seq + 1, "the corpus is shorter than one window"

    def next(self):
        starts = torch.randint(0, len(self.ids) - self.seq - 1, (self.batch,), generator=self.gen)
        return torch.stack([self.ids[s:s + self.seq + 1] for s in starts.tolist()])


class Schedule:
    """Linear warm-up, then a cosine from the peak to a tenth of it."""

    def __init__(self, peak, warmup, total):
        self.peak, self.warmup, self.total = peak, warmup, total

    def at(self, step):
        if step < self.warmup:
            return self.peak * (step + 1) / self.warmup
        done = (step - self.warmup) / max(1, self.total - self.warmup)
        return self.peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, done))))


def make_optimizer(model, lr, weight_decay):
    """AdamW; weight decay on the matrices only (not on norms)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": plain, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)


class Progress:
    """Prints step, losses, tokens/s and the time left, every `every` steps."""

    def __init__(self, label, total_steps, tokens_per_step, every, log):
        self.label, self.total, self.tokens = label, total_steps, tokens_per_step
        self.every, self.log = every, log
        self.start = self.mark = time.time()
        self.sums = {}

    def add(self, step, **values):
        for k, v in values.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        if (step + 1) % self.every and step + 1 != self.total:
            return
        n = (step % self.every) + 1
        now = time.time()
        rate = n * self.tokens / max(now - self.mark, 1e-9)
        left = (self.total - step - 1) * (now - self.start) / (step + 1)
        parts = " ".join(f"{k} {v / n:.4f}" for k, v in self.sums.items())
        self.log(f"{self.label} step {step + 1}/{self.total} {parts} {rate:.0f} tokens/s "
                 f"eta {left / 60:.1f} min")
        self.sums, self.mark = {}, now

    def seconds(self):
        return time.time() - self.start


def train_target(model, batches, steps, lr, aux_coef, log, every=25):
    s = model.shape
    opt = make_optimizer(model, lr, 0.1)
    sched = Schedule(lr, max(1, steps // 20), steps)
    progress = Progress("target", steps, batches.batch * batches.seq, every, log)
    model.train()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = sched.at(step)
        x = batches.next()
        logits, routing = model(x[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, s.vocab), x[:, 1:].reshape(-1))
        aux = modeling.load_balancing_loss(routing, s.experts, s.top_k)
        opt.zero_grad(set_to_none=True)
        (ce + aux_coef * aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        progress.add(step, ce=ce.item(), aux=aux.item())
    model.eval()
    return progress.seconds()


def kl_to_teacher(student_logits, teacher_logits):
    """KL(teacher || student) per position, averaged."""
    t = F.log_softmax(teacher_logits.float(), dim=-1)
    s = F.log_softmax(student_logits.float(), dim=-1)
    return (t.exp() * (t - s)).sum(-1).mean()


class Generated:
    """Batches of the target's own greedy text: windows of `prompt` tokens of the training
    stream (drawn from a seeded generator), each followed by `continuation` tokens the target
    chose greedily (generate_greedy). Generated in chunks of `chunk` sequences as they are
    needed; each sequence is used once. The same seed gives the same batches."""

    def __init__(self, model, ids, batch, prompt, continuation, chunk, seed, log=None):
        self.model, self.batch, self.continuation = model, batch, continuation
        self.seq = prompt + continuation
        self.prompts = Batches(ids, chunk, prompt - 1, seed)
        self.pool, self.log = [], log
        self.seconds, self.sequences = 0.0, 0

    def next(self):
        if len(self.pool) < self.batch:
            start = time.time()
            prompts = self.prompts.next()
            rows = torch.cat([prompts, generate_greedy(self.model, prompts, self.continuation)],
                             dim=1)
            self.pool.extend(rows.unbind(0))
            self.seconds += time.time() - start
            self.sequences += len(prompts)
        out, self.pool = torch.stack(self.pool[:self.batch]), self.pool[self.batch:]
        return out


def _layer_cached(layer, x, cos, sin, mask, cache):
    """DecoderLayer.forward for the new positions x, given the keys and values of the earlier
    ones (cache, or None); returns the output and the extended cache."""
    a = layer.self_attn
    s = a.s
    b, t, _ = x.shape
    h = layer.input_layernorm(x)
    q = a.q_norm(a.q_proj(h).view(b, t, s.heads, s.head_dim)).transpose(1, 2)
    k = a.k_norm(a.k_proj(h).view(b, t, s.kv_heads, s.head_dim)).transpose(1, 2)
    v = a.v_proj(h).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
    q = q * cos + modeling.rotate_half(q) * sin
    k = k * cos + modeling.rotate_half(k) * sin
    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)
        v = torch.cat([cache[1], v], dim=2)
    group = s.heads // s.kv_heads
    scores = (q @ k.repeat_interleave(group, dim=1).transpose(-1, -2)) * (s.head_dim ** -0.5)
    probs = torch.softmax((scores + mask).float(), dim=-1).to(q.dtype)
    out = (probs @ v.repeat_interleave(group, dim=1)).transpose(1, 2).reshape(b, t, -1)
    x = x + a.o_proj(out)
    y = layer.mlp(layer.post_attention_layernorm(x))
    if isinstance(y, tuple):
        y = y[0]
    return x + y, (k, v)


@torch.no_grad()
def generate_greedy(model, prompts, steps):
    """[B, steps] greedy tokens after each row of prompts [B, P], with a KV cache: the prompt in
    one forward, then one token per forward."""
    s = model.shape
    b, p = prompts.shape
    cos, sin = modeling.rope_tables(s, p + steps)
    caches = [None] * len(model.model.layers)
    ids, pos, out = prompts, 0, []
    for _ in range(steps):
        t = ids.shape[1]
        mask = torch.full((t, pos + t), -math.inf).triu(pos + 1)
        x = model.model.embed_tokens(ids)
        for i, layer in enumerate(model.model.layers):
            x, caches[i] = _layer_cached(layer, x, cos[pos:pos + t], sin[pos:pos + t], mask,
                                         caches[i])
        x = model.model.norm(x[:, -1:])
        head = model.model.embed_tokens.weight if model.lm_head is None else model.lm_head.weight
        ids = (x @ head.t()).argmax(-1)
        out.append(ids)
        pos += t
    return torch.cat(out, dim=1)


def distill_draft(draft, teacher, sources, steps, lr, log, every=25):
    """Trains draft on the KL divergence to teacher's distribution at every position of the
    batches of each source (an object with next() -> [B, T + 1] ids, of which the first T are
    fed), the sources' mean KLs summed with their weights: sources is [(name, weight, source)]."""
    opt = make_optimizer(draft, lr, 0.1)
    sched = Schedule(lr, max(1, steps // 20), steps)
    tokens = sum(src.batch * src.seq for _, _, src in sources)
    progress = Progress("draft", steps, tokens, every, log)
    draft.train()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = sched.at(step)
        losses, total = {}, 0.0
        for name, weight, src in sources:
            x = src.next()[:, :-1]
            with torch.no_grad():
                teacher_logits, _ = teacher(x)
            logits, _ = draft(x)
            kl = kl_to_teacher(logits, teacher_logits)
            total = total + weight * kl
            losses["kl_" + name] = kl.item()
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        progress.add(step, **losses)
    draft.eval()
    return progress.seconds()


def windows(ids, seq):
    """Consecutive windows of seq tokens (the last one shorter), each scored from its second
    token on: how the perplexity test scores the held-out text through brigade."""
    return [ids[i:i + seq] for i in range(0, len(ids), seq) if len(ids[i:i + seq]) > 1]


@torch.no_grad()
def evaluate(target, draft, ids, seq, experts):
    """Held-out perplexity of both models, the draft's top-1 agreement with the target, and the
    share of the target's (token, slot) pairs each expert of each layer got."""
    nll = {"target": 0.0, "draft": 0.0}
    agree, count = 0, 0
    loads = torch.zeros(len(target.model.layers), experts)
    for w in windows(ids, seq):
        x = torch.tensor([w], dtype=torch.int64)
        t_logits, routing = target(x)
        d_logits, _ = draft(x)
        for name, logits in (("target", t_logits), ("draft", d_logits)):
            nll[name] += F.cross_entropy(logits[0, :-1], x[0, 1:], reduction="sum").item()
        agree += (t_logits[0, :-1].argmax(-1) == d_logits[0, :-1].argmax(-1)).sum().item()
        count += len(w) - 1
        for layer, (_, chosen) in enumerate(routing):
            loads[layer] += torch.bincount(chosen.reshape(-1), minlength=experts).float()
    loads = loads / loads.sum(dim=1, keepdim=True)
    return {
        "tokens": count,
        "target_perplexity": math.exp(nll["target"] / count),
        "draft_perplexity": math.exp(nll["draft"] / count),
        "draft_top1_agreement": agree / count,
        "expert_load_share": loads.tolist(),
    }


@torch.no_grad()
def greedy(model, ids, steps):
    """steps greedy tokens after ids, recomputing the whole sequence each step."""
    out = list(ids)
    for _ in range(steps):
        logits, _ = model(torch.tensor([out], dtype=torch.int64))
        out.append(int(logits[0, -1].argmax()))
    return out[len(ids):]
