"""A rendered prompt: the messages of one case, the render stage's output.

Kept apart from :mod:`geval_spec.judge.types` so that ``validate``, which
renders but sends nothing, does not build the request-to-judgment types.
"""

from __future__ import annotations

from geval_spec.values import frozen


@frozen
class Message:
    """One chat message: its role and content."""

    role: str
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@frozen
class Rendered:
    """The messages a case's template rendered to."""

    case_id: str
    messages: tuple[Message, ...]

    def as_dicts(self) -> list[dict[str, str]]:
        return [m.as_dict() for m in self.messages]


def serialise(messages: tuple[Message, ...]) -> str:
    """The messages as one text (for token counts and prefix comparisons)."""
    return "".join(f"<{m.role}>\n{m.content}\n" for m in messages)
