"""Music (spec section 1.4): the user's favourites, and playback against the substitute catalogue."""

from __future__ import annotations

import re

from inference.benchmarks.etapp.sandbox.core import Env, records


class MusicStreamingApp:
    """Upstream's MusicStreamingApp class: same method and parameter names, so Python words the errors."""

    TOOLS = ("play_music", "get_music_list_in_favorites")

    def __init__(self, env: Env) -> None:
        self._env = env

    def play_music(self, music_name, volume_level):
        # Literal, case-insensitive substring on the title (upstream: a regex); the most annotated
        # match wins, the first in catalogue order on a tie. The volume is not checked, as upstream.
        # Upstream lower-cases the name before matching: a non-string fails there, in Python's words.
        wanted = re.compile(re.escape(music_name.lower()), re.IGNORECASE)
        matches = [track for track in self._env.data.music if wanted.search(track.title)]
        if not matches:
            return {"status": "failure", "message": f"Error: Music track '{music_name}' not found in the database."}
        best = max(matches, key=lambda track: track.annotation_count)
        return {"status": "success", "message": f"Playing: {best.title} at a volume level: {volume_level}"}

    def get_music_list_in_favorites(self):
        # A bare list, without upstream's usual status wrapper.
        return records(self._env.data.table(self._env.user, "favorites"))
