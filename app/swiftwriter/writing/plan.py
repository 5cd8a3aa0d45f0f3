"""A take's session, resolved (issue 61): `SessionPlan` holds everything a session needs, each
part already worked out from the writer's request before the session is built (take.resolve):
the ending in tokens (a length in words measured on the writer's text, the project's stop
sequences added), the history as a ProjectHistory or None, the settings, the prompt's text or
ids and where the take goes. session.session_for(plan) builds the session from it in one call.

Only "Keep to the story"'s bans are left to the take's thread (take.Take._keep_to_story): they
need the whole built prompt, which only the session can make."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from swiftwriter.engine.decoding.settings import ContextSettings, DraftSettings, SamplingSettings
from swiftwriter.writing.endings import TakeEnding

if TYPE_CHECKING:
    from swiftwriter.store import Project
    from swiftwriter.writing.history import ProjectHistory
    from swiftwriter.writing.loaded import LoadedModelLike


@dataclass(frozen=True)
class SessionPlan:
    """One take's session, resolved: a DocumentSession's where `project` is set (the app,
    `generate PROJECT DOC`), else a PromptSession's (`generate --prompt-file`, a synopsis)."""

    loaded: LoadedModelLike  # a modelstore LoadedModel, or a stand-in with the same attributes
    ending: TakeEnding  # in tokens, with the project's stop sequences
    sampling: SamplingSettings
    drafting: DraftSettings
    context: ContextSettings
    prompt_text: str | None  # the text before the cursor; None: the whole document
    prompt_ids: tuple[int, ...] | None = None  # without a project: these ids exactly
    project: Project | None = None  # None: a take stored nowhere
    doc_id: int | None = None
    direction: str = ""  # what happens next
    story_mode: str = "none"  # the earlier documents the model sees (context.STORY_MODES)
    history: ProjectHistory | None = None  # the project's drafting history, or none
    flush_interval: float = 1.0  # seconds between two writes of the take's record
