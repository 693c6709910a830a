"""A question put to a classroom room: its choices, its hidden answer, one ballot a member.

A question the teacher wrote has no answer (``answer`` None): its reveal is the room's counts alone.

``rooms.Rooms.open_vote`` puts one; ``public_vote`` is what every page is shown of it (its counts and its answer
only once revealed)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Vote:
    """One question put to the room: its choices, its answer (hidden until revealed; None for a question the
    teacher wrote, whose reveal is the room's counts alone), one ballot per member."""

    id: int
    question: str
    choices: list[list]  # [choice id, label(s)]
    answer: str | None
    text: dict | str | None = None  # the question as the pages show it; None: a lesson's (read from the lesson)
    ballots: dict[str, str] = field(default_factory=dict)
    open: bool = True
    revealed: bool = False

    def counts(self) -> dict[str, int]:
        counts = {str(cid): 0 for cid, _ in self.choices}
        for choice in self.ballots.values():
            counts[choice] += 1
        return counts


def public_vote(vote: Vote, member: str | None) -> dict:
    """A vote as every page sees it: the member's own choice, counts and answer only once revealed."""
    public: dict = {"id": vote.id, "question": vote.question, "choices": vote.choices, "open": vote.open}
    if vote.text is not None:
        public["text"] = vote.text
    if member is not None:
        public["mine"] = vote.ballots.get(member)
    if vote.revealed:
        public.update(answer=vote.answer, counts=vote.counts(), answered=len(vote.ballots))
    return public
