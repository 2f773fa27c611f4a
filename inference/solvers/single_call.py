"""One prompt, one answer: every conversation's request is generated once, in one batch."""

from __future__ import annotations

from inference.solvers import Conversation, Generate


class SingleCall:
    """Ask every sample once and append the model's answer as the assistant turn."""

    def solve(self, conversations: list[Conversation], generate: Generate) -> list[Conversation]:
        live = [c for c in conversations if c.request is not None]
        for conversation, generation in zip(live, generate([c.request for c in live])):
            conversation.messages.append({"role": "assistant", "content": generation.output})
            conversation.generations.append(generation)
            conversation.request = None
        return conversations


SOLVER = SingleCall()
