"""Logprob scoring: where the distribution is read, scores written as several tokens, expected_score's keys.

Each test builds the tokens a provider returns (the chosen token, its log
probability and the top alternatives) and checks the judgment made from them.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geval_spec import expected_score
from geval_spec.judge.scoring import judge_scores
from geval_spec.judge.types import Choice, TokenLogprob

LN = math.log


def tok(token: str, p: float = 1.0, *alternatives: tuple[str, float]) -> TokenLogprob:
    """A chosen token with probability p and its alternatives (token, probability)."""
    top = ((token, LN(p)),) + tuple((t, LN(q)) for t, q in alternatives)
    return TokenLogprob(token=token, logprob=LN(p), top=top)


def judged(tokens: list[TokenLogprob], scale: range):
    text = "".join(t.token for t in tokens)
    return judge_scores(list(scale), "logprobs", "c1", "j", [Choice(text=text, logprobs=tuple(tokens))])


HEAD = '{"reasoning": "r", "errors": [], "score": '


# -- 1. the score is read inside the JSON object that was parsed --------------------------------
def test_score_read_outside_the_parsed_output_is_never_used():
    """A trailing '"score": 2' after the object that was parsed used to be read: 4 written, 1.9 scored."""
    tokens = [tok(HEAD), tok("4", 0.9, ("3", 0.1)), tok("}"),
              tok(' Note: "score": '), tok("2", 0.9, ("1", 0.1)), tok(" if strict.")]
    j = judged(tokens, range(1, 6))
    assert j.valid and j.details.written_score == 4
    assert j.score == pytest.approx(3.9)


def test_score_read_outside_the_parsed_output_when_the_token_disagrees_is_invalid():
    """The token at the score's position must decode to the score the judge wrote."""
    tokens = [tok(HEAD), tok("3", 0.8, ("4", 0.2)), tok("}")]
    choice = Choice(text=HEAD + "4}", logprobs=tuple(tokens))  # the text says 4, the token stream says 3
    j = judge_scores([1, 2, 3, 4, 5], "logprobs", "c1", "j", [choice])
    assert not j.valid and j.score is None
    assert j.reason == "the logprobs at the score's position stand for 3, but the judge wrote 4"


def test_score_read_outside_the_parsed_output_with_zero_probability_is_invalid():
    """A written score with probability 0 cannot be the weight of its own judgment."""
    zero = TokenLogprob(token="4", logprob=-9999.0, top=(("3", LN(0.7)), ("5", LN(0.3))))
    j = judged([tok(HEAD), zero, tok("}")], range(1, 6))
    assert not j.valid and j.reason == "the written score 4 has probability 0 in the logprobs"


@pytest.mark.parametrize("bad", [math.nan, math.inf, 50.0, 1000.0])  # (exp(1000) overflows)
def test_logprobs_that_are_no_log_probabilities_make_the_judgment_invalid(bad):
    """A server's NaN, Infinity (JSON as Python reads it) or positive logprob at the score position made a valid
    judgment with no score (NaN) or a distribution of mass 1e22: the run counted it valid, the report not."""
    for score_token in (TokenLogprob(token="4", logprob=bad, top=(("4", bad), ("3", LN(0.1)))),
                        TokenLogprob(token="4", logprob=LN(0.9), top=(("4", LN(0.9)), ("3", bad)))):
        j = judged([tok(HEAD), score_token, tok("}")], range(1, 6))
        assert not j.valid and j.score is None
        assert j.reason == "the logprobs at the score position are not log-probabilities (NaN, infinite, or above 0)"
    rounded = TokenLogprob(token="4", logprob=-0.0001, top=(("4", -0.0001), ("3", LN(0.005))))  # sums to 1.0049
    assert judged([tok(HEAD), rounded, tok("}")], range(1, 6)).valid


def test_score_read_outside_the_parsed_output_skips_nested_objects():
    """Only the object's own "score" key counts, not one in a nested object after it."""
    tokens = [tok(HEAD), tok("4", 0.9, ("3", 0.1)), tok(', "meta": {"score": '), tok("2", 0.9, ("1", 0.1)),
              tok("}}")]
    j = judged(tokens, range(1, 6))
    assert j.valid and j.score == pytest.approx(3.9)


def test_score_read_outside_the_parsed_output_in_a_fenced_block():
    tokens = [tok("```json\n" + HEAD), tok("5", 0.5, ("4", 0.5)), tok("}\n```"), tok(' "score": '), tok("1")]
    j = judged(tokens, range(1, 6))
    assert j.valid and j.score == pytest.approx(4.5)


# -- 2. negative scales: a sign written as its own token ------------------------------------------
def test_negative_scale_sign_token_chain_rule():
    """-1 on -2..2 written as '-' + '1' used to be read at the sign's position: 0.5, valid."""
    tokens = [tok(HEAD), tok("-", 0.8, ("0", 0.1), ("1", 0.1)), tok("1", 0.75, ("2", 0.25)), tok("}")]
    j = judged(tokens, range(-2, 3))
    assert j.valid and j.details.written_score == -1
    # p(-1) = 0.8 * 0.75, p(-2) = 0.8 * 0.25, p(0) = p(1) = 0.1
    assert j.distribution == pytest.approx({-2: 0.2, -1: 0.6, 0: 0.1, 1: 0.1, 2: 0.0})
    assert j.score == pytest.approx(-0.9)


def test_negative_scale_sign_token_chain_rule_two_digits():
    """-10 on -10..10 as '-', '1', '0': p(-10) = p(-) p(1|-) p(0|-1); ending after '-1' is p(-1)."""
    tokens = [tok(HEAD), tok("-", 0.8, ("1", 0.1), ("0", 0.1)), tok("1", 0.7, ("5", 0.3)),
              tok("0", 0.6, ("}", 0.4)), tok("}")]
    j = judged(tokens, range(-10, 11))
    d = j.distribution
    assert j.valid and j.details.written_score == -10
    assert d[-10] == pytest.approx(0.8 * 0.7 * 0.6)
    assert d[-1] == pytest.approx(0.8 * 0.7 * 0.4)  # the number could have ended after '-1'
    assert d[-5] == pytest.approx(0.8 * 0.3)
    assert d[1] == pytest.approx(0.1) and d[0] == pytest.approx(0.1)
    assert sum(d.values()) == pytest.approx(1.0)
    assert j.details.ambiguous_mass == pytest.approx(0.1)  # '1' at the sign's position could start 10


def test_negative_scale_sign_token_chain_rule_alternative_sign_and_digits():
    """The written score 3 as one token: a lone '-' alternative is a negative score of unknown digits."""
    tokens = [tok(HEAD), tok("3", 0.6, ("-", 0.3), ("-2", 0.1)), tok("}")]
    j = judged(tokens, range(-5, 6))
    assert j.valid
    assert j.distribution[3] == pytest.approx(0.6 / 0.7) and j.distribution[-2] == pytest.approx(0.1 / 0.7)
    assert j.valid_mass == pytest.approx(0.7) and j.details.ambiguous_mass == pytest.approx(0.3)


def test_negative_scale_sign_token_chain_rule_merged_continuation():
    """A continuation alternative merged with what follows ('0}') still extends the number."""
    tokens = [tok(HEAD), tok("1", 0.9, ("2", 0.1)), tok("}", 0.5, ("0}", 0.5))]
    j = judged(tokens, range(1, 11))
    assert j.valid and j.distribution[10] == pytest.approx(0.45) and j.distribution[1] == pytest.approx(0.45)


def test_an_alternative_is_read_with_the_characters_before_the_score_at_its_own_position():
    """':3' stands for 3 where the chosen token is ':4' (the score follows a ':'), for no score where the chosen
    token is '4'. What an alternative stands for is kept between answers: the first reading must not leak into the
    second, in either order."""
    colon = [tok('{"reasoning": "r", "errors": [], "score"'), tok(":4", 0.8, (":3", 0.2)), tok("}")]
    plain = [tok(HEAD), tok("4", 0.8, (":3", 0.2)), tok("}")]
    for first, second in ((colon, plain), (plain, colon)):
        judged(first, range(1, 6))
        j = judged(second, range(1, 6))
        assert j.valid
        if second is colon:
            assert j.distribution[3] == pytest.approx(0.2) and j.valid_mass == pytest.approx(1.0)
        else:
            assert j.distribution[3] == 0.0 and j.valid_mass == pytest.approx(0.8)


# -- 3. expected_score's keys ---------------------------------------------------------------------
def test_expected_score_raw_token_keys_add_up():
    """' 4' and '4' are the same score: their probabilities add (the later key used to replace the earlier)."""
    value = expected_score({" 4": -0.2, "4": -1.0, "5": -0.9})
    p4, p5 = math.exp(-0.2) + math.exp(-1.0), math.exp(-0.9)
    assert value == pytest.approx((4 * p4 + 5 * p5) / (p4 + p5))
    assert round(value, 3) == 4.255


def test_expected_score_raw_token_keys_off_the_scale_are_an_error():
    with pytest.raises(ValueError, match="'4.'"):
        expected_score({"4.": -0.2, "5": -0.9})
    with pytest.raises(ValueError, match="'7'"):
        expected_score({"7": -0.2, "5": -0.9}, range(1, 6))


def _top_level_value_by_characters(text: str, lo: int, hi: int, key: str) -> int | None:
    """The character-by-character reading that _top_level_value's regex replaced (the reference)."""
    depth, i, found = 0, lo, None
    while i < hi:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < hi and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if depth == 1 and text[i + 1:j] == key:
                k = j + 1
                while k < hi and text[k] in " \t\r\n":
                    k += 1
                if k < hi and text[k] == ":":
                    k += 1
                    while k < hi and text[k] in " \t\r\n":
                        k += 1
                    found = k
            i = j + 1
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    return found


_KEYS = st.sampled_from(["score", "reasoning", "errors", "x", 'sc"ore', "score\\", "{", "]"])
_VALUES = st.recursive(st.one_of(st.integers(-3, 12), st.text(alphabet='ab"\\{}[]:, \n\u00e9', max_size=8)),
                       lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
                       max_leaves=10)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5), st.sampled_from([None, 1, "\t"]),
       st.sampled_from([(", ", ": "), (",", ":"), (" ,", " :  ")]), st.booleans(), st.text(max_size=5))
def test_the_score_key_is_found_where_the_reading_by_characters_found_it(obj, indent, separators, ascii, before):
    """The score's position in a judge's JSON: a regex over its strings and brackets finds the object's own key
    where the character-by-character reading did (nested keys, quotes, backslashes and brackets inside strings,
    any spacing), and the value found there is the one json.loads reads."""
    import json

    from geval_spec.judge.scoring import _top_level_value

    body = json.dumps(obj, indent=indent, separators=separators, ensure_ascii=ascii)
    text = before + body + " trailing"
    lo, hi = len(before), len(before) + len(body)
    at = _top_level_value(text, lo, hi, "score")
    assert at == _top_level_value_by_characters(text, lo, hi, "score")
    assert (at is None) == ("score" not in obj)
    if at is not None:
        assert json.JSONDecoder().raw_decode(text, at)[0] == obj["score"]


def _score_path_walked(texts, start, end):
    """The reading of score_path by a walk from the first token (the code before 2026-12-03)."""
    text = "".join(texts)
    path, pos, prefix, closed = [], 0, "", False
    for i, token in enumerate(texts):
        t0, t1 = pos, pos + len(token)
        pos = t1
        if t1 <= start or t0 >= end:
            continue
        a, b = max(start, t0), min(end, t1)
        if not path:
            prefix = token[: a - t0]
        path.append((i, text[a:b]))
        if b == end:
            closed = t1 > end
    return path, prefix, closed


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["", "1", "12", " 3", ":", '"', "4}", "", "x"]), max_size=8), st.data())
def test_the_score_path_found_by_bisection_is_the_walks(texts, data):
    """score_path finds the tokens of the score's characters from the first that ends after its start (empty
    tokens inside the score included, those at its edges not), as a walk over every token did."""
    from geval_spec.judge.scoring import score_path

    n = len("".join(texts))
    start = data.draw(st.integers(0, n))
    end = data.draw(st.integers(start, n))
    assert score_path(texts, start, end) == _score_path_walked(texts, start, end)


_TOKEN_TEXT = st.sampled_from(["", "1", "2", " 3", "x"])
_LOGPROB = st.one_of(st.floats(allow_nan=True), st.integers(-5, 0), st.booleans(), st.none(), st.just("-0.1"))
_ALTERNATIVE = st.one_of(st.fixed_dictionaries({}, optional={"token": st.one_of(_TOKEN_TEXT, st.integers()),
                                                             "logprob": _LOGPROB}), st.none(), _TOKEN_TEXT)
_POSITION = st.one_of(
    st.fixed_dictionaries({}, optional={"token": st.one_of(_TOKEN_TEXT, st.integers(), st.none()), "logprob": _LOGPROB,
                                        "top_logprobs": st.one_of(st.lists(_ALTERNATIVE, max_size=4), st.none(),
                                                                  _TOKEN_TEXT)}), st.none(), st.integers(), _TOKEN_TEXT)


@settings(max_examples=500, deadline=None)
@given(_POSITION)
def test_the_alternatives_read_at_a_position_are_those_of_its_token(position):
    """Logprobs.alternatives(i) reads (text, logprob) pairs straight from the answer, as building the position's
    TokenLogprob (Logprobs.at, removed) and adding its chosen token when the alternatives leave it out did (before
    2026-12-03)."""
    import math

    from geval_spec.judge.types import Logprobs, TokenLogprob, _logprob

    def at(t):  # Logprobs.at, as it was
        if not isinstance(t, dict):
            return TokenLogprob("", float("-inf"), ())
        top = tuple((str(x.get("token", "")), _logprob(x.get("logprob"))) for x in (t.get("top_logprobs") or [])
                    if isinstance(x, dict))
        return TokenLogprob(token=str(t.get("token", "")), logprob=_logprob(t.get("logprob")), top=top)

    tok = at(position)
    expected = list(tok.top)
    if all(t != tok.token for t, _ in expected):
        expected.append((tok.token, tok.logprob))
    got = Logprobs([position]).alternatives(0)
    assert [t for t, _ in got] == [t for t, _ in expected]
    assert all(a == b or (math.isnan(a) and math.isnan(b)) for (_, a), (_, b) in zip(got, expected))


@pytest.mark.parametrize("where", ["chosen", "alternative", "both"])
@pytest.mark.parametrize("huge", [10**400, -(10**400)])
def test_a_logprob_too_large_for_a_float_makes_an_invalid_judgment_not_a_crash(where, huge):
    """A server can send a whole number of 400 digits as a logprob. float() of it raised OverflowError out of the
    scoring (exit 70, and again at every rerun, which reads the same stored answer); it is now +-inf: a positive
    one is refused as no log-probability, a negative one is probability 0."""
    from geval_spec.judge.types import Logprobs

    text = HEAD + "4}"
    tokens = [{"token": t, "logprob": -0.01, "top_logprobs": [{"token": t, "logprob": -0.01}]} for t in
              (HEAD, "4", "}")]
    if where in ("chosen", "both"):
        tokens[1]["logprob"] = huge
    if where in ("alternative", "both"):
        tokens[1]["top_logprobs"] = [{"token": "4", "logprob": huge}, {"token": "3", "logprob": -2.0}]
    judgment = judge_scores([1, 2, 3, 4, 5], "logprobs", "c1", "j", [Choice(text=text, logprobs=Logprobs(tokens))])
    if where == "chosen":  # the alternatives list the chosen 4 with its own logprob, which is the one read
        assert judgment.valid and judgment.score == 4.0
    elif huge > 0:
        assert not judgment.valid and "not log-probabilities" in (judgment.reason or "")
    else:  # the written 4 has probability 0
        assert not judgment.valid and "probability 0" in (judgment.reason or "")
