"""The app holds a marathon take: a long take in Creative mode with "Slide window", under a real
X server (Xvfb) with the default model, watched as a writer would watch it.

- Screenshots of the start, the middle and the end of the take (marathon-start.png,
  marathon-middle.png, marathon-end.png next to this file).
- The GUI's longest stall: a QTimer heartbeat every 20 ms in the GUI thread; the longest gap
  between two beats, less the 20 ms, is the longest time the window could not answer. Beside
  it, Python's longest garbage collection and when (one stops every thread while it runs).
- The saved take grows as it goes: a thread opens the project read-only every 2 s and reads the
  streaming generation's saved text (the store writes it about once a second, so a kill -9
  loses at most the last second); at the end, every word of the take is in the saved document.
- Resident memory as the take grows (flat once the window has filled), and the Speed dock's
  measured speedup over plain decoding at the end.

Usage (needs xvfb and ImageMagick's `import`):
    xvfb-run -a -s "-screen 0 1280x860x24" .venv/bin/python \
        resources/screenshots/capture_marathon_take.py [PROMPT] [WORDS] [--window N] [--seed N] \
        [--keep-to-story]
PROMPT is a held-out suite prompt's name (default: orchard), WORDS the take's length (50000);
--window N makes the take's sliding generator see at most N tokens (as `bench --context-limit`
does), so a short take slides as a long one does; --seed N samples with that seed instead of a
random one (the bench's lanes use seed 1); --keep-to-story ticks "Keep to the story" (no
chatter's marks, no letters in scripts the story does not use). Prints the figures as JSON at
the end."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEAT_MS = 20


def shoot(name: str) -> None:
    subprocess.run(["import", "-window", "root", str(HERE / name)], check=True)
    print(f"wrote {HERE / name}", flush=True)


def words(text: str) -> list[str]:
    return text.split()


def contains_words(document: str, take: str) -> bool:
    """Every word of the take, in order and together, in the document (layout aside)."""
    return " ".join(words(take)) in " ".join(words(document))


class Heartbeat:
    """The longest gap between two beats of a GUI-thread timer, less the beat itself."""

    def __init__(self):
        from PySide6.QtCore import QTimer

        self.timer = QTimer()
        self.timer.setInterval(BEAT_MS)
        self.timer.timeout.connect(self.beat)
        self.last = None
        self.longest_ms = 0.0
        self.at_s = None
        self.t0 = time.monotonic()

    def start(self) -> None:
        self.last = time.monotonic()
        self.timer.start()

    def beat(self) -> None:
        now = time.monotonic()
        stall = (now - self.last) * 1000 - BEAT_MS
        if stall > self.longest_ms:
            self.longest_ms, self.at_s = stall, round(now - self.t0, 1)
        self.last = now


class GcWatch:
    """Python's garbage collections: each stops every thread (the GUI's too) while it runs, so
    the longest, and when, tells whether a GUI stall was one."""

    def __init__(self, t0: float):
        self.t0, self.started = t0, 0.0
        self.longest_ms, self.at_s, self.full = 0.0, None, 0
        gc.callbacks.append(self.hear)

    def hear(self, phase: str, info: dict) -> None:
        now = time.monotonic()
        if phase == "start":
            self.started = now
            return
        self.full += info["generation"] == 2
        took = (now - self.started) * 1000
        if took > self.longest_ms:
            self.longest_ms, self.at_s = took, round(now - self.t0, 1)


class SavedWatcher(threading.Thread):
    """Reads the streaming take's saved text every `every` seconds from a read-only view of the
    project: (seconds, saved words, RSS MB) per look; `on_words` hears the saved word count."""

    def __init__(self, path: Path, doc_id: int, on_words, every: float = 2.0):
        super().__init__(daemon=True)
        self.path, self.doc_id, self.on_words, self.every = path, doc_id, on_words, every
        self.points: list[tuple[float, int, float | None]] = []
        self.stopped = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        from swiftwriter.bench.curves import rss_mb
        from swiftwriter.store import Project

        while not self.stopped.wait(self.every):
            try:
                with Project.open(self.path, readonly=True) as view:
                    live = [g for g in view.generations(self.doc_id) if g.status == "streaming"]
                    saved = len(words(live[-1].text)) if live else None
            except Exception as exc:  # a busy file: look again next time
                print(f"watcher: {exc}", flush=True)
                continue
            if saved is None:
                continue
            self.points.append((round(time.monotonic() - self.t0, 1), saved, rss_mb()))
            self.on_words(saved)


def growth(points) -> dict:
    """How the saved take grew: looks, looks where it had grown, the longest wait between two
    growths, and RSS at the first look, the middle and the end."""
    grew = [b for a, b in zip(points, points[1:], strict=False) if b[1] > a[1]]
    times = [points[0][0]] + [p[0] for p in grew] if points else []
    waits = [b - a for a, b in zip(times, times[1:], strict=False)]
    rss = [p[2] for p in points if p[2] is not None]
    return {
        "looks": len(points),
        "grew": len(grew),
        "saved_words_last_look": points[-1][1] if points else 0,
        "longest_wait_between_growths_s": round(max(waits), 1) if waits else None,
        "rss_mb": [rss[0], rss[len(rss) // 2], rss[-1]] if rss else [],
    }


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    limit = seed = None
    keep_to_story = "--keep-to-story" in sys.argv
    if "--window" in sys.argv:
        limit = int(sys.argv[sys.argv.index("--window") + 1])
        args.remove(str(limit))
    if "--seed" in sys.argv:
        seed = int(sys.argv[sys.argv.index("--seed") + 1])
        args.remove(str(seed))
    prompt = args[0] if args else "orchard"
    target = int(args[1]) if len(args) > 1 else 50_000
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QTextCursor
    from PySide6.QtWidgets import QApplication
    from swiftwriter.bench.suite import load_suite
    from swiftwriter.store import Project
    from swiftwriter.ui.main_window import MainWindow

    if limit is not None:  # the take's sliding generator sees at most `limit` tokens
        from swiftwriter.engine.decoding.generator import Generator

        init = Generator.__init__

        def capped(self, *args, **kwargs):
            init(self, *args, **kwargs)
            if self.context.policy == "slide":  # not the plain baseline's: it stops at the end
                self.max_context = min(self.max_context or limit, limit)

        Generator.__init__ = capped
    text = {p.name: p for p in load_suite("held-out")}[prompt].text
    folder = Path(tempfile.mkdtemp(prefix="swiftwriter-marathon-"))
    os.environ["SWIFTWRITER_CONFIG_DIR"] = str(folder / "config")  # not the writer's own
    path = folder / f"{prompt.title()}.swiftwriter"
    with Project.create(path, title=prompt.title()) as project:
        doc_id = project.add_document("Chapter 1", text.strip()).id
    app = QApplication(sys.argv[:1])
    window = MainWindow(project=path)
    window.ask = lambda title, text: True
    window.show_error = lambda title, text: (print(f"{title}: {text}", flush=True), app.exit(4))
    window.resize(1280, 860)
    window.move(0, 0)
    window.show()
    heart = Heartbeat()
    collections = GcWatch(heart.t0)
    shots: dict[str, float] = {}
    out: dict = {"prompt": prompt, "target_words": target, "window": limit, "seed": seed,
                 "project": str(path)}  # fmt: skip

    def maybe_shoot(saved: int) -> None:  # from the watcher's thread: `import` reads X itself
        for name, share in (("start", 0.02), ("middle", 0.5)):
            if name not in shots and saved >= max(30, share * target):
                shots[name] = saved
                shoot(f"marathon-{name}.png")

    watcher = SavedWatcher(path, doc_id, maybe_shoot)

    def on_ready(_loaded) -> None:
        window.tree.select(doc_id)
        panel = window.panel
        panel.creative.setChecked(True)
        panel.context_policy.setCurrentText("Slide window")
        panel.set_target(target, "words")
        if seed is not None:  # else the app's own: a random seed
            panel.seed.setValue(seed)
        panel.story_only.setChecked(keep_to_story)
        print(f"mode: Creative, context: {panel.context()}, target {target:,} words, "
              f"keep to the story: {keep_to_story}", flush=True)  # fmt: skip
        heart.start()
        watcher.start()
        window.actions_by_name["generate"].trigger()

    def on_done(result: dict) -> None:
        watcher.stopped.set()
        stats = result.get("stats", {})
        keys = ("tokens", "tokens_per_s", "tau", "speedup_vs_plain", "plain_tokens_per_s",
                "windowed_from", "slides", "shifts", "reprefills", "dtype", "status", "stop_reason")  # fmt: skip
        out["stats"] = {k: stats.get(k, result.get(k)) for k in keys}
        out["dock_speedup"] = window.stats_dock.labels["speedup"].text()
        out["longest_stall_ms"] = round(heart.longest_ms, 1)
        out["longest_stall_at_s"] = heart.at_s
        out["longest_gc_ms"] = round(collections.longest_ms, 1)
        out["longest_gc_at_s"] = collections.at_s
        out["full_collections"] = collections.full
        out["saved"] = growth(watcher.points)
        out["shots_at_saved_words"] = dict(shots)
        window.editor.moveCursor(QTextCursor.MoveOperation.End)  # the take's end in view
        window.editor.ensureCursorVisible()
        QTimer.singleShot(1500, lambda: finish(result.get("generation_id")))

    def finish(gen_id) -> None:
        shoot("marathon-end.png")
        window.safekeeping.save_now()
        with Project.open(path, readonly=True) as view:
            take = view.generation(gen_id).text if gen_id is not None else ""
            document = view.document(doc_id).text
        out["take_words"] = len(words(take))
        out["every_word_saved"] = bool(take) and contains_words(document, take)
        print(json.dumps(out, indent=1), flush=True)
        app.quit()

    window.model_ready.connect(on_ready)
    window.model_failed.connect(lambda message: (print(message), app.exit(3)))
    window.takes.finished.connect(on_done)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
