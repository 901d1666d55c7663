"""Stop sequences over streamed text: a match is cut from the output and ends the reply;
only the characters that could still be the start of a stop are held back.

    f = StopFilter(["\\n\\n", "END"])
    out = f.feed("Hello EN")   # "Hello " (the "EN" could start "END")
    out = f.feed("D more")     # "" and f.matched == "END"
    out = f.flush()            # at the end of generation: what was held back

ignore_leading: stops met before the first non-whitespace text are dropped
and generation goes on (x_colibri_ignore_leading_stop, and the implicit
role-marker stops some templates need).

`kept` records which input characters were let through (log-prob alignment);
`after` collects the text that follows a match (a tool-call section opener
uses this filter to split the answer from the calls).
"""
from __future__ import annotations

from colibri.chat.spans import Spans


class StopFilter:
    def __init__(self, stops: list[str], ignore_leading: bool = False):
        self.stops = [s for s in stops if s]
        # for many stops (a Hermes model's bare-JSON openers): their first characters, and every proper prefix
        self._firsts = {s[0] for s in self.stops}
        self._prefixes = {s[:n] for s in self.stops for n in range(1, len(s))}
        self._longest = max((len(s) for s in self.stops), default=0)
        self.ignore_leading = ignore_leading
        self.matched: str | None = None
        self.kept = Spans()  # input characters let through, in input offsets
        self.after = ""  # input after the match
        self._held = ""
        self._pos = 0  # input characters fed so far; _held is always their tail
        self._seen_text = False  # some non-whitespace text has been let through

    def feed(self, text: str) -> str:
        """The text that is now safe to emit; "" once a stop has matched."""
        if self.matched is not None:
            self.after += text
            return ""
        buf = self._held + text
        base = self._pos - len(self._held)
        self._pos += len(text)
        return self._scan(buf, base, final=False)

    def assume_matched(self, stop: str, after: str = "") -> None:
        """The stop was met before any input (the prompt already opened a tool section, with
        `after` the text it wrote past the opener): everything fed from now on follows it."""
        self.matched, self.after = stop, after

    def flush(self) -> str:
        """End of generation: a held-back partial stop is ordinary text after all (and a
        whole stop held back while a longer or earlier one could still match now matches)."""
        held, self._held = self._held, ""
        return "" if self.matched is not None else self._scan(held, self._pos - len(held), final=True)

    def _scan(self, buf: str, base: int, final: bool) -> str:
        """Emit what is safe of buf (input offset base), match a stop, hold back the rest.
        A stop matches only once no stop that starts earlier, or at the same place and is
        longer, can still complete: the answer never depends on how the text was split."""
        out = []
        while True:
            hit = self._first_match(buf)
            if hit is None:
                break
            start, stop = hit
            undecided = None if final else self._undecided(buf, start, stop)
            if undecided is not None:  # wait and see: hold from where the other stop would start
                out.append(self._keep(buf[:undecided], base))
                self._held = buf[undecided:]
                return "".join(out)
            before = buf[:start]
            out.append(self._keep(before, base))
            if self.ignore_leading and not self._seen_text and not before.strip():
                buf = buf[start + len(stop):]  # a leading stop: drop it, keep what came before, go on
                base += start + len(stop)
                continue
            self.matched = stop
            self.after = buf[start + len(stop):]
            self._held = ""
            return "".join(out)
        keep = 0 if final else self._partial_suffix(buf)
        self._held = buf[len(buf) - keep:] if keep else ""
        out.append(self._keep(buf[:len(buf) - keep], base))
        return "".join(out)

    def _undecided(self, buf: str, start: int, stop: str) -> int | None:
        """Where a stop that starts before `start` (or at it, longer than `stop`) is still a
        proper prefix of buf's tail: more text may complete it. None: `stop` wins now."""
        longest = max(len(s) for s in self.stops)
        for j in range(max(0, len(buf) - longest + 1), start + 1):
            tail = buf[j:]
            for s in self.stops:
                if len(s) > len(tail) and s.startswith(tail) and (j < start or len(s) > len(stop)):
                    return j
        return None

    def _keep(self, text: str, at: int) -> str:
        self.kept.add(at, at + len(text))
        if text.strip():
            self._seen_text = True
        return text

    def _first_match(self, buf: str) -> tuple[int, str] | None:
        if not any(c in buf for c in self._firsts):
            return None
        best = None
        for s in self.stops:
            i = buf.find(s)
            if i >= 0 and (best is None or i < best[0] or (i == best[0] and len(s) > len(best[1]))):
                best = (i, s)
        return best

    def _partial_suffix(self, buf: str) -> int:
        """Length of the longest tail of buf that is a proper prefix of some stop."""
        for n in range(min(self._longest - 1, len(buf)), 0, -1):
            if buf[len(buf) - n:] in self._prefixes:
                return n
        return 0
