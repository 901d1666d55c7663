"""Stop sequences over streamed text: a match is cut from the output and ends the reply;
only the characters that could still be the start of a stop are held back.

    f = StopFilter(["\\n\\n", "END"])
    out = f.feed("Hello EN")   # "Hello " (the "EN" could start "END")
    out = f.feed("D more")     # "" and f.matched == "END"
    out = f.flush()            # at the end of generation: what was held back

ignore_leading: stops met before the first non-whitespace text are dropped
and generation goes on (x_colibri_ignore_leading_stop, and the implicit
role-marker stops some templates need).
"""
from __future__ import annotations


class StopFilter:
    def __init__(self, stops: list[str], ignore_leading: bool = False):
        self.stops = [s for s in stops if s]
        self.ignore_leading = ignore_leading
        self.matched: str | None = None
        self._held = ""
        self._seen_text = False  # some non-whitespace text has been let through

    def feed(self, text: str) -> str:
        """The text that is now safe to emit; "" once a stop has matched."""
        if self.matched is not None:
            return ""
        buf = self._held + text
        out = []
        while True:
            hit = self._first_match(buf)
            if hit is None:
                break
            start, stop = hit
            before = buf[:start]
            if self.ignore_leading and not self._seen_text and not before.strip():
                out.append(before)  # a leading stop: drop it, keep what came before, go on
                buf = buf[start + len(stop):]
                continue
            out.append(before)
            self.matched = stop
            self._held = ""
            return self._note("".join(out))
        keep = self._partial_suffix(buf)
        self._held = buf[len(buf) - keep:] if keep else ""
        out.append(buf[:len(buf) - keep])
        return self._note("".join(out))

    def flush(self) -> str:
        """End of generation: a held-back partial stop is ordinary text after all."""
        held, self._held = self._held, ""
        return "" if self.matched is not None else self._note(held)

    def _note(self, text: str) -> str:
        if text.strip():
            self._seen_text = True
        return text

    def _first_match(self, buf: str) -> tuple[int, str] | None:
        best = None
        for s in self.stops:
            i = buf.find(s)
            if i >= 0 and (best is None or i < best[0] or (i == best[0] and len(s) > len(best[1]))):
                best = (i, s)
        return best

    def _partial_suffix(self, buf: str) -> int:
        """Length of the longest tail of buf that is a proper prefix of some stop."""
        longest = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(buf)), longest, -1):
                if buf.endswith(s[:n]):
                    longest = n
                    break
        return longest
