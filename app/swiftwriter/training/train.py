"""Training a drafter with the base model frozen, against the model's own next-token
distributions (self-distillation; see features.py), with resumable checkpoints.

Both kinds are trained on what they will face: the linear heads read the pre-norm state at t and
head k learns the model's distribution at t+k; the recurrent drafter is unrolled over its own
predictions (feature at t, then its own guesses), learning each step's distribution plus the
feature itself (EAGLE's regression term).

What each step's distribution is matched against is the objective: "greedy" the penalised
distribution at temperature 1 (its first choice is what greedy modes verify), "coupled" the
distribution a sampled preset draws from (penalty, temperature, top-p, min-p), which is what
decides agreement under the shared noise (accuracy.coupled_agreement), "both" the sum, and "tv"
that distribution in total variation, which is what the "fastest" sampler's rejection walk
accepts one draft at (1 - TV)."""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from swiftwriter import atomic
from swiftwriter.engine.decoding import drafter_files as files
from swiftwriter.engine.decoding.drafters import build
from swiftwriter.engine.decoding.logits import LogitsPipeline
from swiftwriter.engine.decoding.settings import MODES
from swiftwriter.errors import UserError
from swiftwriter.training import accuracy


@dataclass
class TrainSettings:
    kind: str = "recurrent"
    steps: int = 1500
    batch: int = 512  # positions per step
    lr: float = 0.0  # 0 = the kind's default (linear 3e-2: their input has RMS ~38; recurrent 1e-3)
    weight_decay: float = 0.0
    warmup: int = 50
    depth: int = 3  # linear: number of heads; recurrent: unrolled steps
    draft_vocab: int = 8192
    feature_weight: float = 0.1
    seed: int = 0
    checkpoint_every: int = 100
    checkpoint_minutes: float = 5.0  # and at least this often (a large model's steps are slow)
    val_rows: int = 16
    # The contextual penalty the engine verifies with (the product's default 1.2 over 1,024):
    # the teacher's distribution is penalised over the text's window, and so are the drafter's
    # own scores before the loss, as the drafter source penalises them when drafting.
    penalty: float = 1.2
    window: int = 1024
    objective: str = "greedy"  # greedy, coupled, both or tv (see the module's docstring)
    preset: str = "creative"  # the app mode (settings.MODES) whose sampling "coupled" learns
    init: str = ""  # a drafter folder to start from: its weights, its vocabulary's prefix

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise UserError(
                f"Unknown objective '{self.objective}' (known: {', '.join(OBJECTIVES)})"
            )
        if self.objective != "greedy" and MODES.get(self.preset, MODES["precise"]).greedy:
            raise UserError(
                f"The {self.objective} objective needs a sampled preset, not '{self.preset}'"
            )

    def learning_rate(self) -> float:
        return self.lr or (3e-2 if self.kind == "linear" else 1e-3)


OBJECTIVES = ("greedy", "coupled", "both", "tv")


def _kl_to(logq: torch.Tensor, idx: torch.Tensor, p: torch.Tensor):
    """(KL(p || q) per position over p's held mass, q on p's columns, the mass p holds)."""
    lq = logq.gather(-1, idx.clamp_min(0))
    held = p.sum(-1)
    keep = p > 0
    phat = p / held.clamp_min(1e-12)[:, None]
    kl = torch.where(keep, phat * (phat.clamp_min(1e-30).log() - lq), 0.0).sum(-1)
    return kl, torch.where(idx >= 0, lq.exp(), 0.0), held


def coupled_loss(logq: torch.Tensor, idx: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Per position: KL(p || q) plus 1 - the agreement under shared noise, both 0 exactly when
    q is p. `logq` [B, N]: the drafter's log-probabilities at the preset's temperature over
    its vocabulary; `idx` [B, K] columns of `logq` (-1: none); `p` [B, K] the preset's
    distribution on them (0 where filtered, or outside the drafter's vocabulary: mass no draft
    can win). The KL term pulls q onto p's support where q has no mass yet (the agreement term has no
    gradient there); the agreement term weighs positions by what drafting gains."""
    kl, q, held = _kl_to(logq, idx, p)
    agree = accuracy.coupled_agreement(p, q, (1 - held).clamp_min(0), (1 - q.sum(-1)).clamp_min(0))
    return torch.where(held > 0, kl + 1 - agree, 0.0)


def tv_loss(logq: torch.Tensor, idx: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Per position: KL(p || q) plus TV(p, q) = 1 - sum min(p, q), both 0 exactly when q is p
    (arguments as coupled_loss's). TV is what the "fastest" sampler's rejection walk loses on
    one draft from q (it accepts at 1 - TV); the KL term gives a gradient where q has no mass
    on p's support yet."""
    kl, q, held = _kl_to(logq, idx, p)
    return torch.where(held > 0, kl + 1 - torch.minimum(p, q).sum(-1), 0.0)


SAMPLED_LOSSES = {"coupled": coupled_loss, "both": coupled_loss, "tv": tv_loss}


def choose_vocab(data: dict[str, torch.Tensor], size: int, vocab_size: int) -> torch.Tensor:
    """The `size` ids the model writes and predicts most often in the training text, most
    frequent first (a drafter may use only a prefix of it: its head costs what it reads)."""
    counts = torch.bincount(data["tokens"].reshape(-1), minlength=vocab_size).double()
    counts += torch.bincount(
        data["top_ids"][..., 0].reshape(-1).long(), minlength=vocab_size
    ).double()
    size = min(size, vocab_size)
    return counts.topk(size).indices


class _Batches:
    """Random (row, position) pairs from the training rows, reproducible per step (drawn on the
    CPU, so a GPU run draws the same ones)."""

    def __init__(self, data, rows: torch.Tensor, depth: int, seed: int, device="cpu"):
        self.data, self.rows, self.depth, self.seed = data, rows, depth, seed
        self.length = data["tokens"].shape[1]
        self.device = device

    def positions(self, step: int, n: int):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        r = self.rows[torch.randint(len(self.rows), (n,), generator=g)]
        t = torch.randint(self.length - self.depth - 1, (n,), generator=g)
        return r.to(self.device), t.to(self.device)


class Trainer:
    """The drafter trains where the model's lm_head is (a GPU when the model is on one); the
    teacher's features stay in memory and each batch's rows travel."""

    def __init__(self, model, model_id: str, data: dict, settings: TrainSettings):
        self.model, self.model_id, self.s = model, model_id, settings
        self.device = model.get_output_embeddings().weight.device
        cfg = model.config
        hidden = int(cfg.hidden_size)
        self.eps = files.rms_eps(cfg)
        self.full_vocab = int(model.get_output_embeddings().weight.shape[0])
        self._split_rows(data["tokens"].shape[0], settings.val_rows)
        start = files.load(Path(settings.init), model) if settings.init else None
        self.vocab = self._draft_vocab(start, data, settings)
        self._on_device(model, data)
        torch.manual_seed(settings.seed)
        self.module = build(
            settings.kind,
            hidden,
            eps=self.eps,
            n_heads=settings.depth,
            intermediate=2 * hidden,
        ).to(self.device)
        if start is not None:
            self.module.load_state_dict(start.module.state_dict())
        self.filters = None
        if settings.objective != "greedy":  # the target has its penalty already
            mode = MODES[settings.preset]
            self.filters = LogitsPipeline(replace(mode, penalty=1.0, dry_multiplier=0.0))
        self.opt = torch.optim.AdamW(
            self.module.parameters(),
            lr=settings.learning_rate(),
            weight_decay=settings.weight_decay,
        )
        self.step = 0
        self.batches = _Batches(
            self.data, self.train_rows, settings.depth, settings.seed, self.device
        )

    def _split_rows(self, n_rows: int, val_rows: int) -> None:
        """The last rows (a tenth, at most `val_rows`) held out for validation."""
        if n_rows < 2:
            raise UserError("Too little training text: write or give more (at least two rows)")
        val = min(val_rows, max(1, n_rows // 10))
        self.val_rows = torch.arange(n_rows - val, n_rows)
        self.train_rows = torch.arange(0, n_rows - val)

    def _draft_vocab(self, start, data: dict, settings: TrainSettings) -> torch.Tensor:
        """The draft vocabulary: the starting drafter's (fine-tuning), else the text's most
        frequent ids."""
        if start is None:
            return choose_vocab(data, settings.draft_vocab, self.full_vocab)
        if start.kind != settings.kind:
            raise UserError(f"{settings.init} holds a {start.kind} drafter, not {settings.kind}")
        # its head was trained on these rows, most frequent first: a prefix of them may
        # be kept (the drafter source scores only its first `head_vocab` by default)
        vocab = start.vocab[: settings.draft_vocab]
        settings.draft_vocab = len(vocab)
        return vocab

    def _on_device(self, model, data: dict) -> None:
        """What every step reads, on the drafter's device: the small tensors, the map from the
        full vocabulary to the draft one, the head's draft rows and the embedding."""
        # the features stay where they are (accuracy.at)
        small = ("tokens", "top_ids", "top_probs")
        self.data = {k: v.to(self.device) if k in small else v for k, v in data.items()}
        self.to_draft = torch.full((self.full_vocab,), -1, dtype=torch.long, device=self.device)
        self.to_draft[self.vocab.to(self.device)] = torch.arange(
            len(self.vocab), device=self.device
        )
        with torch.no_grad():
            head = model.get_output_embeddings().weight.detach()
            self.w = head[self.vocab.to(head.device)].float().contiguous()
            self.emb = model.get_input_embeddings().weight.detach().to(self.device)

    # -- losses ---------------------------------------------------------------------------------
    def _target(self, r, pos):
        ids = self.data["top_ids"][r, pos].long()
        probs = self.data["top_probs"][r, pos].float()
        idx = self.to_draft[ids]
        probs = torch.where(idx >= 0, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-6)
        return idx.clamp_min(0), probs

    def draft_logits(self, state, r, pos):
        """The drafter's scores over its vocabulary, penalised as the drafter source does."""
        return accuracy.draft_scores(
            state, self.w, self.data["tokens"], r, pos, self.to_draft, self.s.penalty, self.s.window
        )

    def _soft_ce(self, state, r, pos):
        logp = self.draft_logits(state, r, pos).log_softmax(-1)
        idx, probs = self._target(r, pos)
        return -(logp.gather(-1, idx) * probs).sum(-1).mean()

    def _sampled(self, state, r, pos):
        """The sampled objective's loss (coupled_loss or tv_loss) against the preset's p."""
        logq = (self.draft_logits(state, r, pos) / self.filters.s.temperature).log_softmax(-1)
        ids, p = accuracy.preset_target(
            self.data["top_ids"][r, pos], self.data["top_probs"][r, pos], self.filters
        )
        idx = self.to_draft[ids]
        p = torch.where(idx >= 0, p, 0.0)
        return SAMPLED_LOSSES[self.s.objective](logq, idx, p).mean()

    def predictions(self, r, t):
        """Yield (i, state, position of the distribution it should match) for i = 1..depth."""
        return accuracy.unroll(self.module, self.s.kind, self.data, self.emb, r, t, self.s.depth)

    def loss(self, r, t) -> torch.Tensor:
        total = 0.0
        for i, state, pos in self.predictions(r, t):
            weight = 0.8 ** (i - 1)
            term = 0.0
            if self.s.objective in ("greedy", "both"):
                term = self._soft_ce(state, r, pos)
            if self.s.objective in SAMPLED_LOSSES:
                term = term + self._sampled(state, r, pos)
            if self.s.kind == "recurrent" and self.s.feature_weight:
                target = accuracy.at(self.data["final"], r, pos, self.device).float()
                term = term + self.s.feature_weight * nn.functional.smooth_l1_loss(state, target)
            total = total + weight * term
        return total

    def lr_at(self, step: int) -> float:
        s = self.s
        base = s.learning_rate()
        if step < s.warmup:
            return base * (step + 1) / s.warmup
        progress = (step - s.warmup) / max(1, s.steps - s.warmup)
        return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))

    def draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This step's (rows, positions), reproducible per step."""
        return self.batches.positions(self.step, self.s.batch)

    def train_step(self) -> float:
        self.module.train()
        for group in self.opt.param_groups:
            group["lr"] = self.lr_at(self.step)
        r, t = self.draw()
        loss = self.loss(r, t)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
        self.opt.step()
        self.step += 1
        return float(loss.detach())

    @torch.no_grad()
    def validate(self, max_positions: int = 4096) -> dict:
        """Per draft position: how often the drafter's top-1 / top-3 holds the model's own
        (penalised) top choice on held-out rows (full vocabulary: an id outside the draft
        vocabulary is a miss)."""
        self.module.eval()
        length = self.data["tokens"].shape[1]
        n_pos = length - self.s.depth - 1
        r = self.val_rows.repeat_interleave(n_pos)
        t = torch.arange(n_pos).repeat(len(self.val_rows))
        if len(r) > max_positions:
            pick = torch.linspace(0, len(r) - 1, max_positions).long()
            r, t = r[pick], t[pick]
        return accuracy.hits(
            self.module,
            self.s.kind,
            self.data,
            self.emb,
            self.w,
            self.vocab,
            r,
            t,
            self.s.depth,
            self.s.penalty,
            self.s.window,
            self.filters,
        )

    # -- checkpoints ----------------------------------------------------------------------------
    def save_checkpoint(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {
            f"module.{k}": v.detach().cpu().contiguous()
            for k, v in self.module.state_dict().items()
        }
        for i, (_p, state) in enumerate(self.opt.state.items()):
            for k, v in state.items():
                if torch.is_tensor(v):
                    tensors[f"opt.{i}.{k}"] = v.detach().cpu().contiguous().reshape(v.shape)
        meta = {
            "step": self.step,
            "settings": asdict(self.s),
            "model": self.model_id,
            "config_hash": files.config_hash(self.model.config),
        }
        atomic.replace_with(folder / "state.safetensors", lambda tmp: save_file(tensors, tmp))
        atomic.replace_text(folder / "state.json", json.dumps(meta))

    def resume(self, folder: Path) -> bool:
        meta_path, weights = folder / "state.json", folder / "state.safetensors"
        if not meta_path.is_file() or not weights.is_file():
            return False
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        ours = (self.model_id, files.config_hash(self.model.config))
        if "config_hash" in meta and (meta.get("model"), meta["config_hash"]) != ours:
            raise UserError(
                f"The checkpoint in {folder} belongs to model '{meta.get('model')}', not to "
                f"'{self.model_id}': use another --out (or delete it to start again)"
            )
        saved = meta["settings"]
        for key in ("kind", "depth", "draft_vocab", "seed", "penalty", "window"):
            if saved.get(key) != getattr(self.s, key):
                raise UserError(
                    f"The checkpoint in {folder} was trained with {key}={saved.get(key)}, "
                    f"not {getattr(self.s, key)}: use another --out or the same settings"
                )
        tensors = load_file(str(weights))
        self.module.load_state_dict(
            {k[len("module.") :]: v for k, v in tensors.items() if k.startswith("module.")}
        )
        params = list(self.module.parameters())
        for i, p in enumerate(params):
            state = {k.split(".", 2)[2]: v for k, v in tensors.items() if k.startswith(f"opt.{i}.")}
            if state:  # AdamW keeps its step count on the CPU, its moments beside the weights
                self.opt.state[p] = {
                    k: v if k == "step" else v.to(p.device) for k, v in state.items()
                }
        self.step = int(meta["step"])
        return True

    def bundle(self, validation: dict, extra: dict) -> files.DrafterBundle:
        """The trained drafter, on the CPU (where it is saved and drafts)."""
        card = files.make_card(
            self.model,
            self.s.kind,
            self.model_id,
            self.vocab,
            eps=self.eps,
            n_heads=self.s.depth,
            intermediate=2 * int(self.model.config.hidden_size),
            training={**asdict(self.s), **extra},
            validation=validation,
        )
        return files.DrafterBundle(self.module.cpu(), self.vocab.cpu(), card)


@contextlib.contextmanager
def _interrupt_between_steps():
    """Ctrl+C (in the main thread: the CLI) lets the step under way finish, so the checkpoint
    never holds half a step; yields whether it was pressed."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    pressed: list[bool] = []
    try:
        before = signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    except ValueError:  # no signals here (an embedded interpreter)
        yield lambda: False
        return
    try:
        yield lambda: bool(pressed)
    finally:
        signal.signal(signal.SIGINT, before)


def train(
    model,
    model_id: str,
    data: dict,
    out_dir: Path,
    settings: TrainSettings,
    on_progress: Callable[[int, int, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> files.DrafterBundle | None:
    """Train (resuming from out_dir/checkpoint), save the drafter into out_dir and return it.
    Returns None when stopped early (the checkpoint keeps the progress)."""
    out_dir = Path(out_dir)
    checkpoint = out_dir / "checkpoint"
    trainer = Trainer(model, model_id, data, settings)
    trainer.resume(checkpoint)
    resumed_from = trainer.step
    started = saved = time.time()
    loss = float("nan")
    with _interrupt_between_steps() as interrupted:
        try:
            while trainer.step < settings.steps:
                if should_stop and should_stop():
                    trainer.save_checkpoint(checkpoint)
                    return None
                loss = trainer.train_step()
                if on_progress:
                    on_progress(trainer.step, settings.steps, loss)
                if interrupted():
                    raise KeyboardInterrupt
                late = time.time() - saved > 60 * settings.checkpoint_minutes
                if trainer.step % settings.checkpoint_every == 0 or late:
                    trainer.save_checkpoint(checkpoint)
                    saved = time.time()
        except KeyboardInterrupt:
            trainer.save_checkpoint(checkpoint)  # Ctrl+C keeps the progress: run again
            raise
    trainer.save_checkpoint(checkpoint)
    validation = trainer.validate()
    extra = {
        "train_positions": int(len(trainer.train_rows) * data["tokens"].shape[1]),
        "final_loss": round(loss, 4) if loss == loss else None,
        "seconds_this_run": round(time.time() - started, 1),
        "resumed_from_step": resumed_from,
    }
    bundle = trainer.bundle(validation, extra)
    files.save(out_dir, bundle)
    return bundle
