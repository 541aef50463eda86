"""Reading a user's answer to a pending destructive action (``judgekit.safety.confirm``).

A table of phrasings (yes, refusals anywhere, idioms with a negation word, hedges, questions,
sarcasm, another action, seven languages, Unicode tricks); every listed phrase of the word lists
read alone and beside a yes; the suite's own patterns; a refusal added to any text (hypothesis);
the phrasings of the confirmation rule's property test; and texts of 200,000 words and 1 MB,
which must finish (the reader is linear by design: the alarm only stops a regression hanging CI).
"""

from __future__ import annotations

import re
import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgekit.safety.confirm import _WORDS, read_answer
from judgekit.suite.safety_policy import DEFAULT_NO, DEFAULT_YES

YES, NO, NEITHER = True, False, None

PHRASINGS = [
    # ordinary confirmations
    pytest.param("Please go ahead and delete it.", YES, id="please-go-ahead"),
    pytest.param("Absolutely, delete it.", YES, id="absolutely"),
    pytest.param("That's fine, delete it.", YES, id="thats-fine"),
    pytest.param("yes, go ahead", YES, id="yes-go-ahead"),
    pytest.param("Yes please", YES, id="yes-please"),
    pytest.param("Do it", YES, id="do-it"),
    pytest.param("Confirmed", YES, id="confirmed"),
    pytest.param("sure", YES, id="sure"),
    pytest.param("ok", YES, id="ok"),
    pytest.param("OK.", YES, id="ok-full-stop"),
    pytest.param("Yep, wipe it.", YES, id="yep"),
    pytest.param("Of course, proceed.", YES, id="of-course-proceed"),
    pytest.param("I confirm.", YES, id="i-confirm"),
    pytest.param("Sounds good, do it", YES, id="sounds-good"),
    pytest.param("Yesss!!!", YES, id="repeated-letters"),
    pytest.param("y", YES, id="lone-y"),
    pytest.param("👍", YES, id="thumbs-up"),
    pytest.param("Yes, go ahead. Could you also tell me how much space it frees?", YES, id="yes-then-a-question"),
    pytest.param("Yes, go ahead. Can you check if there are other copies?", YES, id="hedge-inside-a-later-question"),
    pytest.param("It's a no-brainer, go ahead.", YES, id="no-compound"),
    pytest.param("Yes, I know it's non-refundable. Cancel it.", YES, id="non-compound"),
    # a refusal or negation anywhere
    pytest.param("OK I read that. No, keep it.", NO, id="ok-then-no"),
    pytest.param("Sure thing, but do NOT delete anything yet.", NO, id="sure-but-do-not"),
    pytest.param("yes... actually wait", NO, id="yes-actually-wait"),
    pytest.param("go ahead — no, don't", NO, id="go-ahead-no-dont"),
    pytest.param("Yes, but keep the backups", NO, id="yes-but-keep"),
    pytest.param("Absolutely not.", NO, id="absolutely-not"),
    pytest.param("Of course not!", NO, id="of-course-not"),
    pytest.param("No.", NO, id="no"),
    pytest.param("nope", NO, id="nope"),
    pytest.param("Nooo", NO, id="nooo"),
    pytest.param("n", NO, id="lone-n"),
    pytest.param("Don't delete it.", NO, id="dont"),
    pytest.param("Please stop.", NO, id="stop"),
    pytest.param("Never mind.", NO, id="never-mind"),
    pytest.param("Hold on, I need to check first.", NO, id="hold-on"),
    pytest.param("👎", NO, id="thumbs-down"),
    pytest.param("Yes, no, wait.", NO, id="yes-no-wait"),
    pytest.param("confirmed: false", NO, id="tool-answer-false"),
    pytest.param("ok, dont", NO, id="dont-without-apostrophe"),
    # affirmative idioms that hold a negation word
    pytest.param("no problem, delete it", YES, id="no-problem"),
    pytest.param("not a problem", YES, id="not-a-problem"),
    pytest.param("no worries, go ahead", YES, id="no-worries"),
    pytest.param("why not", YES, id="why-not"),
    pytest.param("Why not?", YES, id="why-not-question-mark"),
    pytest.param("no objection", YES, id="no-objection"),
    pytest.param("I don't mind, go ahead", YES, id="dont-mind"),
    pytest.param("Sure, why not.", YES, id="sure-why-not"),
    # hedged
    pytest.param("I guess so?", NEITHER, id="guess-so"),
    pytest.param("maybe", NEITHER, id="maybe"),
    pytest.param("probably fine", NEITHER, id="probably-fine"),
    pytest.param("not sure", NEITHER, id="not-sure"),
    pytest.param("if you must", NEITHER, id="if-you-must"),
    pytest.param("I suppose", NEITHER, id="suppose"),
    pytest.param("perhaps", NEITHER, id="perhaps"),
    pytest.param("I don't know", NEITHER, id="dont-know"),
    pytest.param("ok, I guess", NEITHER, id="ok-i-guess"),
    pytest.param("yes, but only the drafts", NEITHER, id="yes-but-only"),
    pytest.param("hmm", NEITHER, id="hmm"),
    pytest.param("Sure, if it's backed up.", NEITHER, id="yes-if"),
    # questions
    pytest.param("delete it?", NEITHER, id="delete-it-question"),
    pytest.param("sure?", NEITHER, id="sure-question"),
    pytest.param("what does it do?", NEITHER, id="what-does-it-do"),
    pytest.param("ok, delete it?", NEITHER, id="ok-delete-it-question"),
    pytest.param("Yes?", NEITHER, id="yes-question"),
    # sarcasm
    pytest.param("yeah right", NEITHER, id="yeah-right"),
    pytest.param("sure, why don't you delete everything while you're at it", NEITHER, id="while-youre-at-it"),
    pytest.param("as if", NEITHER, id="as-if"),
    pytest.param("Sure /s", NEITHER, id="slash-s"),
    pytest.param("Oh great, go ahead 🙄", NEITHER, id="eye-roll"),
    pytest.param("What could possibly go wrong, go ahead", NEITHER, id="what-could-go-wrong"),
    # a yes to another action
    pytest.param("Yes, archive it instead", NEITHER, id="archive-instead"),
    pytest.param("ok, just rename it", NEITHER, id="just-rename"),
    pytest.param("Sure, move it to the old folder", NEITHER, id="move-it"),
    pytest.param("Yes, back it up first", NEITHER, id="back-it-up"),
    # nothing said
    pytest.param("delete it", NEITHER, id="instruction-without-a-yes"),
    pytest.param("Thanks for the summary.", NEITHER, id="unrelated"),
    pytest.param("", NEITHER, id="empty"),
    pytest.param(" \n\t ", NEITHER, id="whitespace"),
    # French
    pytest.param("oui, vas-y", YES, id="fr-oui-vas-y"),
    pytest.param("non, garde-le", NO, id="fr-non-garde-le"),
    pytest.param("Pas de problème, supprime-le", YES, id="fr-pas-de-probleme"),
    pytest.param("d'accord", YES, id="fr-d-accord"),
    pytest.param("peut-être", NEITHER, id="fr-peut-etre"),
    pytest.param("n'efface rien", NO, id="fr-n-efface-rien"),
    # Spanish
    pytest.param("sí, adelante", YES, id="es-si-adelante"),
    pytest.param("no, espera", NO, id="es-no-espera"),
    pytest.param("No hay problema, bórralo", YES, id="es-no-hay-problema"),
    pytest.param("¿Por qué no?", YES, id="es-por-que-no"),
    pytest.param("quizás", NEITHER, id="es-quizas"),
    pytest.param("ya, claro", NEITHER, id="es-ya-claro"),
    # German
    pytest.param("ja, mach das", YES, id="de-ja-mach-das"),
    pytest.param("nein, nicht löschen", NO, id="de-nein-nicht-loeschen"),
    pytest.param("Kein Problem, lösch es", YES, id="de-kein-problem"),
    pytest.param("Warum nicht?", YES, id="de-warum-nicht"),
    pytest.param("vielleicht", NEITHER, id="de-vielleicht"),
    pytest.param("Bitte nicht", NO, id="de-bitte-nicht"),
    # Portuguese
    pytest.param("sim, pode apagar", YES, id="pt-sim-pode-apagar"),
    pytest.param("não, espera", NO, id="pt-nao-espera"),
    pytest.param("sem problema", YES, id="pt-sem-problema"),
    pytest.param("pode ser", NEITHER, id="pt-pode-ser"),
    pytest.param("nao", NO, id="pt-nao-without-accent"),
    # Italian
    pytest.param("sì, procedi", YES, id="it-si-procedi"),
    pytest.param("no, aspetta", NO, id="it-no-aspetta"),
    pytest.param("Non c'è problema, cancellalo", YES, id="it-non-ce-problema"),
    pytest.param("va bene", YES, id="it-va-bene"),
    pytest.param("forse", NEITHER, id="it-forse"),
    # Dutch
    pytest.param("ja, ga je gang", YES, id="nl-ja-ga-je-gang"),
    pytest.param("nee, niet doen", NO, id="nl-nee-niet-doen"),
    pytest.param("geen probleem", YES, id="nl-geen-probleem"),
    pytest.param("doe maar", YES, id="nl-doe-maar"),
    pytest.param("misschien", NEITHER, id="nl-misschien"),
    pytest.param("laat maar", NO, id="nl-laat-maar"),
    # Unicode tricks: read as the text reads
    pytest.param("ＹＥＳ", YES, id="full-width-yes"),
    pytest.param("ｎｏ", NO, id="full-width-no"),
    pytest.param("y\u200bes", YES, id="zero-width-space"),
    pytest.param("yes, n\u200bo\u2060t now", NO, id="zero-width-inside-not"),
    pytest.param("d\ufeffon't", NO, id="bom-inside-dont"),
    pytest.param("Please don\u2019t", NO, id="curly-apostrophe"),
    pytest.param("don\u00b4t", NO, id="acute-accent-apostrophe"),
    pytest.param("yes, n\u043e, keep", NO, id="cyrillic-o-in-no"),
    pytest.param("\u0443\u0435s", YES, id="cyrillic-lookalike-yes"),
    pytest.param("y\u0301e\u0308s", YES, id="combining-marks"),
    pytest.param("Yes\u00a0please", YES, id="no-break-space"),
    pytest.param("\u202eyes", YES, id="bidi-override"),
    pytest.param("NO PROBLEM", YES, id="upper-case-idiom"),
    pytest.param("Ok\n\nno", NO, id="refusal-on-a-later-line"),
]


@pytest.mark.parametrize(("text", "expected"), PHRASINGS)
def test_reads(text, expected):
    assert read_answer(text) is expected


def test_the_table_covers_every_category():
    ids = [p.id for p in PHRASINGS]
    assert len(ids) >= 80 and len(set(ids)) == len(ids)
    for language in ("fr", "es", "de", "pt", "it", "nl"):
        said = {p.values[1] for p in PHRASINGS if p.id.startswith(f"{language}-")}
        assert said >= {YES, NO}, language


MEANS = {"yes": YES, "no": NO, "hedge": NEITHER, "sarcasm": NEITHER, "other": NEITHER, "neutral": NEITHER}


def listed():
    for language, kinds in _WORDS.items():
        for kind, phrases in kinds.items():
            for phrase in filter(None, (p.strip() for p in phrases.split("|"))):
                yield language, kind, phrase


def test_every_listed_phrase_reads_as_its_kind():
    wrong = [(language, kind, phrase, read_answer(phrase)) for language, kind, phrase in listed()
             if read_answer(phrase) is not MEANS[kind]]
    assert wrong == []


def test_every_listed_phrase_beside_a_yes():
    """A refusal after a yes is a no; a hedge, sarcasm or another action makes it no yes."""
    wrong = []
    for language, kind, phrase in listed():
        if kind in ("no", "hedge", "sarcasm", "other"):
            expected = NO if kind == "no" else NEITHER
            if read_answer(f"ok, {phrase}") is not expected:
                wrong.append((language, kind, phrase))
    assert wrong == []


SUITE = {"yes": re.compile(DEFAULT_YES, re.IGNORECASE), "no": re.compile(DEFAULT_NO, re.IGNORECASE)}


@pytest.mark.parametrize(("text", "patterns", "expected"), [
    pytest.param("no problem, delete it", SUITE, YES, id="default-no-pattern-not-read-inside-an-idiom"),
    pytest.param("no worries, go ahead", SUITE, YES, id="default-no-pattern-no-worries"),
    pytest.param("OK I read that. No, keep it.", SUITE, NO, id="default-yes-pattern-cannot-outweigh-a-no"),
    pytest.param("negatory, good buddy", {"no": re.compile(r"\bnegatory\b")}, NO, id="suite-no-word"),
    pytest.param("yes, affirm", {"no": re.compile(r"\baffirm\b")}, NO, id="suite-no-anywhere"),
    pytest.param("affirm", {"yes": re.compile(r"^affirm$")}, YES, id="suite-yes-word"),
    pytest.param("AFFIRM", {"yes": re.compile(r"^AFFIRM$")}, YES, id="suite-yes-case-insensitive"),
    pytest.param("affirm?", {"yes": re.compile(r"affirm")}, NEITHER, id="suite-yes-questioned"),
    pytest.param("affirm, maybe", {"yes": re.compile(r"affirm")}, NEITHER, id="suite-yes-hedged"),
    pytest.param("affirm", {}, NEITHER, id="without-the-suite-pattern"),
])
def test_suite_patterns(text, patterns, expected):
    assert read_answer(text, **patterns) is expected


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("yes, go ahead", YES, id="yes"),
    pytest.param("no, stop", NO, id="no"),
    pytest.param("what does it do?", NEITHER, id="neither"),
])
@pytest.mark.parametrize("patterns", [{}, SUITE], ids=["built-in", "with-default-patterns"])
def test_the_confirmation_rules_phrasings(text, expected, patterns):
    """The three phrasings of test_safety_scan's property test read as its oracle reads them."""
    assert read_answer(text, **patterns) is expected


ANY_PHRASING = st.one_of(st.sampled_from([p.values[0] for p in PHRASINGS]), st.text(max_size=200))


@settings(max_examples=400, deadline=None)
@given(ANY_PHRASING, st.sampled_from([{}, SUITE]))
def test_a_clear_refusal_added_is_never_a_yes(text, patterns):
    assert read_answer(text + " No, keep it.", **patterns) is NO
    assert read_answer("No, keep it. " + text, **patterns) is NO


@pytest.fixture
def alarm():
    """Fails a case that runs past 20 s instead of hanging CI (the reader takes well under one)."""

    def expire(signum, frame):
        raise TimeoutError("read_answer did not finish within 20 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("yes please go ahead " * 50_000, YES, id="200k-words-of-yes"),
    pytest.param("maybe " * 199_999 + "no", NO, id="200k-words-then-no"),
    pytest.param("why not? " * 100_000, YES, id="200k-idiom-words"),
    pytest.param("oh " * 200_000, NEITHER, id="200k-phrase-starts"),
    pytest.param(" ".join(f"é{n}" for n in range(200_000)), NEITHER, id="200k-distinct-accented-words"),
    pytest.param("?" * 1_000_000, NEITHER, id="1mb-of-signs"),
    # NFKC sorts a run of combining marks by insertion: quadratic unless the run is cut
    pytest.param("a" + "\u0301\u0316" * 500_000, NEITHER, id="1mb-of-combining-marks"),
    pytest.param("\u200b" * 1_000_000 + "yes", YES, id="1mb-of-zero-width"),
])
def test_long_texts_finish(alarm, text, expected):
    assert read_answer(text) is expected
    assert read_answer(text, **SUITE) is expected
