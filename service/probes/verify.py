"""The platform's verification challenge: a garbled arithmetic word problem ("lobster math").

A create answer may carry ``verification_required`` and a ``verification`` object with a
``code`` and a ``challenge`` text such as
``A] lO-bS tErS^ cLaW fO rCe| iS tWeN tY tHrEe NeWtOnS aNd~ iT mUlTiPlIeS bY fIiVe``: numbers
spelled out in mixed case, letters doubled, words split, noise punctuation between. The answer,
``POST /verify {verification_code, answer}``, is the result with two decimals ("115.00").

:func:`solve_challenge` reads the numbers (spelled or digits) and the operation (multiply,
subtract, divide, else add); :func:`garble` writes such challenges for the loopback fake API.

>>> solve_challenge("A] lO-bS tErS^ cLaW fO rCe| iS tWeN tY tHrEe NeWtOnS aNd~ iT "
...                 "mUlTiPlIeS bY fIiVe")
'115.00'
>>> solve_challenge("lOoObStEr sW[iMmS aT/ tWeNtY fIiV e] mEtErS pEr SeCoNd aNd sLoWs "
...                 "DoWn bY sEvEn, wHaT iS tHe NeW sPeEd?")
'18.00'
"""

from __future__ import annotations

import random
import re

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
          "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _squash(s: str) -> str:
    """Doubled letters collapse: the garbling repeats letters, so both sides are squashed."""
    return re.sub(r"(.)\1+", r"\1", s)


_WORDS: dict[str, int] = {_squash(w): i for i, w in enumerate(_UNITS)}
_WORDS.update({_squash(w): 10 * i for i, w in enumerate(_TENS) if w})
_WORDS.update({_squash(_TENS[t] + _UNITS[u]): 10 * t + u for t in range(2, 10)
               for u in range(1, 10)})
_WORDS[_squash("hundred")] = 100
_OPS = (  # first match wins: "total" also appears in product questions
    ("*", ("multipl", "times", "product")),
    ("-", ("minus", "subtract", "lose", "slow", "reduc", "decreas", "less", "fewer", "remain",
           "drop", "left")),
    ("/", ("divid", "split", "ratio")),
)


def _tokens(text: str) -> list[str]:
    return [_squash(t) for t in re.findall(r"[a-z]+|\d+(?:\.\d+)?", text.lower())]


def challenge_numbers(text: str) -> list[float]:
    """Numbers in reading order; a spelled number may be split over several tokens."""
    toks = _tokens(text)
    out: list[float] = []
    i, prev_word = 0, False
    while i < len(toks):
        tok = toks[i]
        if tok == "and" and prev_word and out[-1] >= 100 and out[-1] % 100 == 0:
            i += 1  # "three hundred and twenty one"
            continue
        if tok[0].isdigit():
            value, j = float(tok), i + 1
        else:
            value, j = None, i + 1
            for k in range(min(len(toks), i + 4), i, -1):  # longest join that is a number word
                joined = _squash("".join(toks[i:k]))
                if joined in _WORDS:
                    value, j = float(_WORDS[joined]), k
                    break
        if value is None:
            prev_word, i = False, i + 1
            continue
        last = out[-1] if out and prev_word else None
        if last is not None and value == 100 and 0 < last < 100:
            out[-1] = last * 100
        elif last is not None and last >= 20 and last % 10 == 0 and last < 100 and value < 10:
            out[-1] = last + value  # "twenty" "five" (or "twenty" "5")
        elif last is not None and last >= 100 and last % 100 == 0 and value < 100:
            out[-1] = last + value
        else:
            out.append(value)
        prev_word, i = True, j
    return out


def challenge_operation(text: str) -> str:
    flat = _squash("".join(_tokens(text)))
    for op, words in _OPS:
        if any(_squash(w) in flat for w in words):
            return op
    return "+"


def solve_challenge(text: str) -> str:
    """The answer as the platform wants it: two decimals."""
    nums = challenge_numbers(text)
    if not nums:
        raise ValueError("no number in the challenge")
    op = challenge_operation(text)
    if len(nums) == 1:
        result = nums[0]
    elif op == "*":
        result = nums[0] * nums[1]
    elif op == "-":
        result = nums[0] - nums[1]
    elif op == "/":
        result = nums[0] / nums[1]
    else:  # the question often repeats the numbers: the first two are the operands
        result = nums[0] + nums[1]
    return f"{result:.2f}"


def spell(n: int) -> str:
    """0 <= n < 1000 in words."""
    if n < 20:
        return _UNITS[n]
    if n < 100:
        return _TENS[n // 10] + (f" {_UNITS[n % 10]}" if n % 10 else "")
    return f"{_UNITS[n // 100]} hundred" + (f" {spell(n % 100)}" if n % 100 else "")


def garble(text: str, rng: random.Random) -> str:
    """Mixed case, doubled letters, split words and noise, as the platform writes them."""
    out = []
    for word in text.split():
        chars = []
        for c in word:
            chars.append(c.upper() if rng.random() < 0.5 else c.lower())
            if c.isalpha() and rng.random() < 0.12:
                chars.append(c.lower())
        w = "".join(chars)
        if len(w) > 4 and rng.random() < 0.3:
            cut = rng.randint(2, len(w) - 2)
            w = f"{w[:cut]} {w[cut:]}"
        out.append(w + (rng.choice("]^~|/<>{}-") if rng.random() < 0.4 else ""))
    return " ".join(out)


def make_challenge(rng: random.Random) -> tuple[str, str]:
    """A garbled challenge and its answer, for the loopback fake API."""
    a, b = rng.randint(5, 60), rng.randint(2, 30)
    kind = rng.choice(["add", "sub", "mul"])
    text = {
        "add": f"a lobster swims at {spell(a)} meters per second and speeds up by {spell(b)} "
               "what is the total speed",
        "sub": f"a lobster swims at {spell(a)} meters per second and slows down by {spell(b)} "
               "what is the new speed",
        "mul": f"a lobster claw pushes with {spell(a)} newtons and the force multiplies by "
               f"{spell(b)} what is the force",
    }[kind]
    value = {"add": a + b, "sub": a - b, "mul": a * b}[kind]
    return garble(text, rng), f"{value:.2f}"
