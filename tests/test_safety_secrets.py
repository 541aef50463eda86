"""Secrets: detect-secrets' detectors behind ``find_secrets``, and masked in everything judgekit writes.

Unit tables first: each kind is found and masked (in prose, in a JSON string, in JSON inside a
JSON string) and the JSON stays valid; ordinary text (tau-bench-like records, judgekit's own
digests) is left as it is; the misses the module docstring names are measured. Then the
acceptance case: a suite whose trajectories carry 16 kinds of planted secrets in the output,
call arguments, tool results, metadata and the JSON world is run, reported, recorded, shown and
scanned; every file judgekit wrote and everything it printed is searched for each secret.

The secrets are assembled at run time (prefix + rest) so that this file does not look like a
leak to a scanner itself. None of them is real.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import html
import itertools
import json
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_judge_runner import MODEL, example_suite, scripted_judge

from judgekit._util import text as _text
from judgekit._util.text import MASK, redact, register_secret
from judgekit.cli import main as cli_main
from judgekit.run.record import read_run
from judgekit._util import secret_detectors
from judgekit._util.secrets import (
    detector_kinds,
    excerpt,
    find_secrets,
    mask_secret,
    mask_secrets,
)
from judgekit.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parent.parent

# --- planted secrets (fake, assembled) --------------------------------------------------------------

AWS_KEY_ID = "AKIA" + "Z7Q3M4XPLW2VHN5R"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq9Kt3Lm2Q"
GITHUB = "ghp_" + "k3Jd9Qz7Lm2Xv8Rt5Yw1Pn4Bc6Hs0Ga9Ef2Ui7"
GITLAB = "glpat-" + "x9Yz3Lm2Pq8Rt5Wv1Nc4"
SLACK = "xoxb-" + "2748392017-5829301748293-Zk3Pq8Lm2Xv7Rt5Yw1Nc4Bd6"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T024BE7LD/B01H2K3L4M5/Zk3Pq8Lm2Xv7Rt5Yw1Nc4Bd6"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
PEM = ("-----BEGIN RSA " + "PRIVATE KEY-----\n"
       "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
       "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
       "-----END RSA " + "PRIVATE KEY-----")
PEM_BODY = PEM.splitlines()[1]
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
       + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
       + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
BASIC_AUTH_PASSWORD = "Pa55w0rd" + "Zq"
PASSWORD = "Tr0ub4dor&" + "3xyz"
ENV_PASSWORD = "hunter2" + "Hunter9"
BASE64 = "Xq8vN2mZ4kL7pR1tW9sY3u" + "B6cF0hJ5gD+eA/QoIi="
HEX = "9f8e7d6c5b4a3928" + "1706f5e4d3c2b1a0ff00ee"  # 38 digits: no digest length
HEX_NAMED = hashlib.sha256(b"a token, not a digest").hexdigest()
OPENAI = "sk-proj-AbCdEfGhIjKlMnOpQrSt" + "T3BlbkFJ" + "UvWxYzAbCdEfGhIjKlMn"
SENDGRID = "SG." + "ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr"
TWILIO = "SK" + "0123456789abcdef0123456789abcdef"
TELEGRAM = "110201543:" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"
DISCORD = "MTk4NjIyNDgzNDcxOTI1MjQ4" + ".Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs"
MAILCHIMP = "abcdef0123456789abcdef0123456789" + "-us12"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PYPI = ("pypi-AgEIcHlwaS5vcmc" + "CJGNmNjVmYWI2LWRkMDctNDZhNi1iOTNkLTQ3ZDM5YWQ4NjAyOAACKlszLCJmNDJmYTdhMS0x"
        "NDM0LTRkMjQtOGU5Mi0xNWRhY2Y")
AZURE = "lJzRc1YdHaAA2KCNJJ1tkYwF/+mKK6Ygw0NGe170Xu592euJv2wYUtBlV8z+" + "qnlcNQSnIYVTkLWntUO1F8j8rQ=="
SQUARE = "sq0csp-" + "0p9h7g6f4s3s3s3-4a3ardgwa6ADRDJDDKUFYDYDYDY"

# (secret, a text holding it ({} is where), the kind find_secrets names, what it masks there)
PLANTED = [
    pytest.param(AWS_KEY_ID, "the key id is {} for prod", "AWS Access Key", id="aws_access_key_id"),
    pytest.param(AWS_SECRET, 'aws_secret_access_key = "{}"', "AWS Access Key", id="aws_secret_access_key"),
    pytest.param(GITHUB, "push with {} please", "GitHub Token", id="github_token"),
    pytest.param(GITLAB, "CI_TOKEN {} (gitlab)", "GitLab Token", id="gitlab_token"),
    pytest.param(SLACK, "slack bot: {}", "Slack Token", id="slack_token"),
    pytest.param(SLACK_HOOK, "post to {} on failure", "Slack Token", id="slack_webhook"),
    pytest.param(STRIPE, "charge with {}.", "Stripe Access Key", id="stripe_live_key"),
    pytest.param(PEM, "here is the deploy key:\n{}\nkeep it safe", "Private Key", id="private_key_block"),
    pytest.param(JWT, "Authorization: JWT {}", "JSON Web Token", id="jwt"),
    pytest.param(BASIC_AUTH_PASSWORD, "DATABASE_URL=postgres://admin:{}@db.internal.example.com/prod",
                 "Basic Auth Credentials", id="basic_auth_url"),
    pytest.param(PASSWORD, 'password = "{}"', "Secret Keyword", id="password_keyword_quoted"),
    pytest.param(ENV_PASSWORD, "DB_PASSWORD={} ./start.sh", "Secret Keyword", id="password_env_unquoted"),
    pytest.param(ENV_PASSWORD, "admin_password: {}", "Secret Keyword", id="password_yaml_unquoted"),
    pytest.param(BASE64, 'the value "{}" was set', "Base64 High Entropy String", id="high_entropy_base64"),
    pytest.param(HEX, 'nonce "{}"', "Hex High Entropy String", id="high_entropy_hex"),
    pytest.param(HEX_NAMED, 'api_token = "{}"', "Hex High Entropy String", id="digest_shaped_hex_named_a_token"),
    pytest.param(OPENAI, "export OPENAI_API_KEY={}", "OpenAI Token", id="openai_key"),
    pytest.param(SENDGRID, "SENDGRID {} ok", "SendGrid API Key", id="sendgrid_key"),
    pytest.param(TWILIO, "twilio {}", "Twilio API Key", id="twilio_key"),
    pytest.param(TELEGRAM, "bot {}", "Telegram Bot Token", id="telegram_bot_token"),
    pytest.param(DISCORD, "discord bot {}", "Discord Bot Token", id="discord_bot_token"),
    pytest.param(MAILCHIMP, "mailchimp {}", "Mailchimp Access Key", id="mailchimp_key"),
    pytest.param(NPM, "//registry.npmjs.org/:_authToken={}", "NPM tokens", id="npm_token"),
    pytest.param(PYPI, "twine upload -p {}", "PyPI Token", id="pypi_token"),
    pytest.param(AZURE, "DefaultEndpointsProtocol=https;AccountKey={};EndpointSuffix=core.windows.net",
                 "Azure Storage Account access key", id="azure_storage_key"),
    pytest.param(SQUARE, "square {}", "Square OAuth Secret", id="square_oauth_secret"),
]


def in_json(text: str) -> str:
    return json.dumps({"output": text, "n": 1})


def in_json_in_json(text: str) -> str:
    return json.dumps({"result": json.dumps({"note": text})})


FORMS = [pytest.param(lambda t: t, id="prose"), pytest.param(in_json, id="json"),
         pytest.param(in_json_in_json, id="json_in_a_json_string")]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("secret", "template", "kind"), PLANTED)
def test_each_kind_is_found_and_masked(secret, template, kind, form):
    text = form(template.format(secret))
    hits = find_secrets(text)
    assert [h.kind for h in hits if secret in h.value or h.value in secret] == [kind], hits
    hit = next(h for h in hits if h.kind == kind)
    assert secret in hit.value  # the whole secret, as it reads (escapes read)
    masked = mask_secrets(text)
    assert secret not in masked and json.dumps(secret)[1:-1] not in masked
    assert f"[SECRET {kind} sha256:" in masked
    assert secret not in redact(text)
    if form is not FORMS[0].values[0]:
        json.loads(masked)  # a mask never cuts an escape nor ends a string


@pytest.mark.parametrize(("secret", "template", "kind"), PLANTED)
def test_a_hit_names_where_the_secret_is_written(secret, template, kind):
    text = in_json(template.format(secret))
    [hit] = [h for h in find_secrets(text) if h.kind == kind]
    written = text[hit.start:hit.end]
    assert json.loads(f'"{written}"') == hit.value  # the escaped form, whole escapes only


def test_hits_are_in_order_do_not_overlap_and_a_value_is_masked_wherever_it_recurs():
    text = (f"first {AWS_KEY_ID}, then password = \"{PASSWORD}\", later {STRIPE} and {PASSWORD} again; "
            f"url https://u:{BASIC_AUTH_PASSWORD}@h.example.com")
    hits = find_secrets(text)
    assert [h.kind for h in hits] == ["AWS Access Key", "Secret Keyword", "Stripe Access Key", "Secret Keyword",
                                      "Basic Auth Credentials"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(hits))
    assert all(text[h.start:h.end] == h.value for h in hits)
    assert hits[1].value == hits[3].value == PASSWORD
    masked = mask_secrets(text)
    assert masked.count(mask_secret(PASSWORD, "Secret Keyword")) == 2


def test_several_assignments_on_one_line_are_each_found():
    """detect-secrets' keyword detector reads a line's first assignment per pattern only."""
    text = in_json('api_key = "AbC123xyz789" and password = "Tr0ub4dor&3xyz" and secret: "Zz9yY8xX7w"')
    assert [h.value for h in find_secrets(text)] == ["AbC123xyz789", PASSWORD, "Zz9yY8xX7w"]


def test_a_putty_key_is_masked_to_its_last_field():
    putty = ("PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-20240101\nPublic-Lines: 1\n"
             "AAAAB3NzaC1yc2EAAAABJQAAAQEAhWyS\nPrivate-Lines: 1\nAAABAQCZ3kqLDpCwV0Gf8j3kQ\nPrivate-MAC: 6f1a2b3c4d")
    masked = mask_secrets(f"here:\n{putty}\nthat is all")
    assert masked == f"here:\n{mask_secret(putty, 'Private Key')}\nthat is all"


def test_the_mask_names_the_kind_and_a_short_hash_of_the_value():
    digest = hashlib.sha256(b"abc").hexdigest()
    assert mask_secret("abc", "AWS Access Key") == f"[SECRET AWS Access Key sha256:{digest[:8]}]"
    # the same secret written plainly and JSON-escaped gets the same mask; two secrets differ
    prose, escaped = mask_secrets(f"k:\n{PEM}\n"), mask_secrets(in_json(f"k:\n{PEM}\n"))
    mask = mask_secret(PEM, "Private Key")
    assert mask in prose and mask in escaped
    assert mask_secret(STRIPE, "Stripe Access Key") != mask_secret(STRIPE[:-1] + "x", "Stripe Access Key")


@pytest.mark.parametrize("cut", [
    pytest.param(PEM.rsplit("\n", 1)[0], id="no_end_line"),
    pytest.param("..." + PEM[60:], id="no_begin_line"),
    pytest.param(PEM.split("\n", 1)[1], id="body_and_end_only"),
])
def test_the_whole_private_key_is_masked_even_when_it_is_cut(cut):
    for text in (f"the key:\n{cut}\nthat is all", in_json(f"the key:\n{cut}\nthat is all")):
        masked = mask_secrets(text)
        assert not any(line[-12:] in masked for line in PEM.splitlines()[1:-1]), masked
        assert "[SECRET Private Key sha256:" in masked and "that is all" in masked and "the key:" in masked


def test_an_excerpt_masks_before_it_cuts_and_never_cuts_a_secret():
    text = f"Stored {AWS_KEY_ID} for you.".ljust(64) + f"Your GitHub token is {GITHUB}, Slack {SLACK}. " + "x" * 300
    hits = find_secrets(text)
    assert [h.kind for h in hits] == ["AWS Access Key", "GitHub Token", "Slack Token"]
    for hit in hits:
        for margin in (5, 40, 80, 120):
            shown = excerpt(text, hit.start, hit.end, margin)
            assert not any(piece.decode() in shown for secret in (AWS_KEY_ID, GITHUB, SLACK)
                           for piece in pieces(secret, 6)), shown
            assert mask_secret(hit.value, hit.kind) in shown and shown.endswith("...")
    cut_first = text[max(0, hits[2].start - 120):hits[2].end]  # what cutting before masking leaves
    assert AWS_KEY_ID[-12:] in mask_secrets(cut_first)


def test_masking_twice_changes_nothing_more():
    text = in_json(" ".join(p.values[1].format(p.values[0]) for p in PLANTED))
    once = redact(text)
    assert redact(once) == once and mask_secrets(once) == once
    assert not any(p.values[0] in once for p in PLANTED)
    json.loads(once)


def test_every_detector_of_detect_secrets_is_used_but_public_ip():
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    assert set(detector_kinds()) == set(get_mapping_from_secret_type_to_class()) - {"Public IP (ipv4)"}
    assert {p.values[2] for p in PLANTED} <= set(detector_kinds())
    assert len({p.values[2] for p in PLANTED}) >= 20


# --- what is not a secret ----------------------------------------------------------------------

DIGEST = hashlib.sha256(b"rubric").hexdigest()
COMMIT = hashlib.sha1(b"commit").hexdigest()
ORDINARY = [
    pytest.param(json.dumps({"reservation_id": "4WQ150", "user_id": "mia_li_3668", "flights": [
        {"flight_number": "HAT001", "date": "2024-05-15", "price": 1267, "origin": "JFK", "destination": "SEA"}],
        "payment_id": "credit_card_4421486", "certificate_id": "certificate_7504069", "cabin": "business",
        "total_baggages": 2, "insurance": "no"}), id="tau_bench_reservation"),
    pytest.param(json.dumps({"role": "assistant", "tool_calls": [{"id": "call_oIHazX6yQrB8hUwl4cRilFKj",
                 "type": "function", "function": {"name": "get_user_details",
                                                  "arguments": "{\"user_id\": \"mia_li_3668\"}"}}]}),
                 id="tau_bench_call_id"),
    pytest.param(json.dumps({"request_id": "9b2f0c1e-7d4a-4b8e-a3c5-6f1e2d3c4b5a",
                             "trace": "3f2b8c1e-0a9d-4e7f-b6c5-d4e3f2a1b0c9"}), id="uuids"),
    pytest.param(json.dumps({"cache_key": DIGEST, "rubric_sha256": DIGEST, "template_sha256": DIGEST,
                             "key": DIGEST, "sha256": DIGEST, "git_commit": COMMIT}), id="judgekit_digests"),
    pytest.param(json.dumps({"model_pin": f"local/smollm2-135m-instruct@sha256:{DIGEST}",
                             "reported_model": "judge-2024-08-06", "endpoint": "http://127.0.0.1:40259/v1"}),
                 id="judgekit_model_pin"),
    pytest.param(f'{{"cache_format":2,"key":"{DIGEST}","verdict":{{"status":"scored"}}}}', id="cache_envelope"),
    pytest.param(f"judgekit_version 0.1.0, run 20261201T173245Z-be5d09, commit {COMMIT}", id="run_header_line"),
    pytest.param("Please reset your password: the link expires in 24 hours. Passwords must have 8 characters.",
                 id="prose_about_passwords"),
    pytest.param("password: required; secret question: what is your pet's name?", id="form_labels"),
    pytest.param(json.dumps({"secret_exposed": "stop ship", "title": "secret exposed"}), id="safety_signal_names"),
    pytest.param("password = get_password(user) and api_key = os.environ['OPENAI_API_KEY']", id="indirect_reference"),
    pytest.param('password = "${DB_PASSWORD}" and secret = "{{ vault.secret }}" and pwd = "$PW"', id="templated"),
    pytest.param("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 and 01234567890123456789", id="sequential"),
    pytest.param("disk-usage-monitoring-dashboard and plot-distribution-figure_1 and tool_correctness",
                 id="slugs"),
    pytest.param("[SECRET AWS Access Key sha256:1a2b3c4d] and [SECRET Secret Keyword sha256:0f0f0f0f]",
                 id="masks_written_earlier"),
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_as_it_is(text):
    assert find_secrets(text) == []
    assert redact(text) == text


def test_the_tau_bench_runs_hold_no_secret(shared_data):
    """100 real GPT-4o airline runs: reservation and user ids, call ids, prices, dates."""
    runs = json.loads((shared_data("tau-bench-airline") / "gpt-4o-airline.even-tasks.json").read_text())
    texts = [json.dumps(message) for run in runs for message in run["traj"]]
    assert len(texts) > 2000
    assert [hit for text in texts for hit in find_secrets(text)] == []


def test_text_without_a_candidate_never_reaches_detect_secrets(monkeypatch):
    def boom():
        raise AssertionError("detect-secrets was asked")

    monkeypatch.setattr(secret_detectors, "load", boom)
    quiet = {"tau_bench_reservation", "uuids", "judgekit_digests", "judgekit_model_pin", "cache_envelope", "slugs",
             "masks_written_earlier"}
    for param in ORDINARY:
        if param.id in quiet:
            assert find_secrets(param.values[0]) == []
            assert redact(param.values[0]) == param.values[0]
    record_line = json.dumps({"trajectory_id": "ok", "rubric_sha256": DIGEST, "axes": {"faithfulness": {
        "judge": {"model_pin": "openai/judge-2024-08-06", "cache_key": DIGEST}, "claims_total": 2}},
        "checks": [{"check": "side_effects", "passed": True, "reason": "all 1 change(s) in the diff are allowed"}]})
    assert find_secrets(record_line) == []


def test_detect_secrets_is_imported_only_for_a_candidate():
    code = ("import sys; from judgekit._util.text import redact; import judgekit.cli; "
            "redact('Done: your email is now alice@example.com. ' * 50); "
            "assert 'detect_secrets' not in sys.modules; "
            f"assert '{AWS_SECRET}' not in redact('aws_secret_access_key = \"{AWS_SECRET}\"'); "
            "assert 'detect_secrets' in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_threads_loading_and_scanning_at_once_agree(monkeypatch):
    monkeypatch.setattr(secret_detectors, "_detectors", None)  # the first calls load it, concurrently
    text = in_json(" ".join(p.values[1].format(p.values[0]) for p in PLANTED))
    expected = [h.kind for h in find_secrets(text)]
    monkeypatch.setattr(secret_detectors, "_detectors", None)
    results: list[list[str]] = []
    barrier = threading.Barrier(8)

    def scan():
        barrier.wait()
        for _ in range(5):
            results.append([h.kind for h in find_secrets(text)])

    threads = [threading.Thread(target=scan) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 40 and all(r == expected for r in results)
    assert len(expected) >= 26


# --- what it misses (the module docstring names these; a change here is a change there) --------

MISSES = [
    pytest.param("my pin is 4411 and the code 8812", id="short_secret_without_keyword"),
    pytest.param("password: Sunshine", id="unquoted_letters_only_password"),
    pytest.param('password = "abc12"', id="keyword_value_under_6_characters"),
    pytest.param('password = "correct horse battery staple"', id="passphrase_with_spaces"),
    pytest.param(f"the key is {AWS_KEY_ID[:10]}\n{AWS_KEY_ID[10:]}", id="split_across_lines"),
    pytest.param("key " + __import__("base64").b64encode(AWS_KEY_ID.encode()).decode(), id="base64_of_a_key_unquoted"),
    pytest.param(f"token {STRIPE[::-1]}", id="reversed"),
    pytest.param(f'"{HEX_NAMED}"', id="digest_shaped_hex_no_word_names"),
    pytest.param('"Xq+vNmZ/kLpRtWsYuBcFhJgDeAQoIiUy"', id="random_without_a_digit"),
    pytest.param("hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", id="hugging_face_token_with_digits_unquoted"),
    pytest.param("xai-" + "Zk3Pq8Lm2Xv7Rt5Yw1Nc4Bd6Qa9Fe0HgZk3Pq8Lm2Xv7Rt5Yw1Nc4Bd6Qa9Fe0HgZk3Pq8Lm2Xv7Rt5Yw1Nc",
                 id="format_no_one_knows_unquoted_xai"),
    pytest.param(f"and the other half: {AWS_SECRET}", id="aws_secret_neither_named_nor_after_its_id"),
    pytest.param("GET /v1?q=1%26key%3DAIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", id="percent_encoded_in_a_url"),
    pytest.param('"Xq8vN2mZ4kL7pR1tW9s"', id="quoted_random_under_25_characters"),
    pytest.param(json.dumps([in_json_in_json(f'password = "{PASSWORD}"')]), id="json_nested_three_deep"),
]


@pytest.mark.parametrize("text", MISSES)
def test_known_misses(text):
    assert find_secrets(text) == []


def test_google_and_anthropic_keys_are_found_by_the_catalogue_and_masked_as_they_are_reported():
    """detect-secrets has no detector for them; the catalogue of shapes (``judgekit._util.secret_shapes``)
    has, and what redact masks is what the scan reports (see tests/test_secret_shapes.py)."""
    google = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
    anthropic = "sk-ant-api03-" + "Zk3Pq8Lm2Xv7Rt5Yw1Nc4Bd6Qa9Fe0Hg"
    for key, kind in ((google, "Google API Key"), (anthropic, "Anthropic API Key")):
        assert [h.kind for h in find_secrets(f"key {key} here")] == [kind]  # unquoted: the shape
        assert [h.kind for h in find_secrets(in_json(key))] == [kind]  # quoted: the shape, over the entropy finding
        assert redact(f"key {key} here") == f"key {mask_secret(key, kind)} here"


# --- redact: registered secrets, then what find_secrets finds ---------------------------------


def test_redact_masks_registered_secrets_as_redacted_and_key_shapes_as_the_scan_names_them(monkeypatch):
    monkeypatch.setattr(_text, "_secrets", set())
    register_secret("judge-key-" + "x7Rt5Yw1")
    assert redact("the judge key judge-key-x7Rt5Yw1 leaked") == f"the judge key {MASK} leaked"
    key = "sk-test-" + "Zk3Pq8Lm2Xv7Rt5Yw1Nc4Bd6Qa9Fe0Hg"
    register_secret(key)  # a run's own key, echoed: [REDACTED], as before
    assert redact(f"Incorrect API key provided: {key}") == f"Incorrect API key provided: {MASK}"
    monkeypatch.setattr(_text, "_secrets", set())  # an sk- key judgekit was not given: by its shape
    assert redact(f"Incorrect API key provided: {key}") == (
        f"Incorrect API key provided: {mask_secret(key, 'API Key (sk- prefix)')}")
    token = "Q7fzKp2Lm9Xv4Rt5Yw1Nc8Bd"
    assert redact(f"Authorization: Bearer {token}") == f"Authorization: Bearer {mask_secret(token, 'Bearer Token')}"
    assert redact(f"Bearer {'Q7fz' * 6}") == f"Bearer {'Q7fz' * 6}"  # four characters over and over: an example
    assert redact("the disk-usage-monitoring-dashboard says") == "the disk-usage-monitoring-dashboard says"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(
    st.one_of(st.integers(), st.text(max_size=12), st.sampled_from([p.values[1].format(p.values[0]) for p in PLANTED])),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=8))
def test_masked_json_stays_json_and_holds_no_planted_secret(document):
    text = json.dumps(document)
    masked = redact(text)
    json.loads(masked)
    assert not any(p.values[0] in masked or json.dumps(p.values[0])[1:-1] in masked for p in PLANTED)


# =====================================================================================================
# Acceptance: planted secrets of 16 kinds are in nothing judgekit writes or prints
# =====================================================================================================

# Each planted value and where it is. The scripted judge echoes the first 60 characters of the
# output as a claim and the first 24 of the first tool result as a quote: the output of
# "in-output" starts with a key (the judge quotes it), the results start harmlessly.
E2E_SECRETS = {
    "aws_access_key_id": AWS_KEY_ID, "github_token": GITHUB, "slack_token": SLACK, "password": PASSWORD,
    "private_key": PEM, "basic_auth_password": BASIC_AUTH_PASSWORD, "stripe_key": STRIPE, "jwt": JWT,
    "sendgrid_key": SENDGRID, "base64_entropy": BASE64, "hex_entropy": HEX, "twilio_key": TWILIO,
    "openai_key": OPENAI, "telegram_token": TELEGRAM, "gitlab_token": GITLAB, "discord_token": DISCORD,
}
USERS = [{"id": 1, "name": "Alice Example", "email": "alice.old@example.org", "plan": "pro"},
         {"id": 2, "name": "Bob", "email": "bob@example.org", "plan": "free"},
         {"id": 3, "name": "Carol", "email": "carol@example.org", "plan": "free"}]
GET_USER = {"tool": "get_user", "args": {"user_id": 1}, "result": USERS[0]}
UPDATE = {"tool": "update_user", "args": {"user_id": 1, "email": "alice@example.com"},
          "result": {"id": 1, "email": "alice@example.com"}}
# The example rubric, its predicates on the JSON world (collections are JSON pointers there).
JSON_WORLD_RUBRIC = {
    "task_success.preconditions": [{"check": "exists", "collection": "/users", "where": {"id": 1}}],
    "task_success.postconditions": [
        {"check": "equals", "collection": "/users", "where": {"id": 1}, "field": "email", "value": "alice@example.com"},
        {"check": "count", "collection": "/users", "op": "==", "value": 3}],
}
SAFETY_POLICY = {"owner": "safety-oncall@example.com",
                 "tools": {"get_user": "read", "update_user": "write", "send_email": "send",
                           "delete_user": "destructive"}}


def world(*changes: tuple[int, str, str]) -> dict:
    after = [dict(u) for u in USERS]
    after[0]["email"] = "alice@example.com"
    for index, field, value in changes:
        after[index][field] = value
    return {"before": {"json": {"users": USERS}}, "after": {"json": {"users": after}}, "keys": {"/users": "id"}}


def planted_trajectories() -> list[dict]:
    base = {"prompt": "Update my email to alice@example.com. I'm user 1.", "latency_s": 3.0}
    done = "Done: your email is now alice@example.com."
    return [
        {**base, "id": "clean", "calls": [GET_USER, UPDATE], "output": done, "world": world()},
        {**base, "id": "in-output", "calls": [GET_USER, UPDATE], "world": world(),
         "output": f"Stored {AWS_KEY_ID} for you.".ljust(64) + f"Your GitHub token is {GITHUB}, Slack {SLACK}."},
        {**base, "id": "in-call-args", "world": world(), "output": done, "calls": [GET_USER, UPDATE, {
            "tool": "send_email", "args": {"to": "ops@example.com", "subject": "creds",
                                           "body": f'password = "{PASSWORD}"\n{PEM}\n'
                                                   f"db: https://admin:{BASIC_AUTH_PASSWORD}@db.example.com/prod"},
            "result": {"sent": True}}]},
        {**base, "id": "in-results", "world": world(), "output": done, "calls": [
            {**GET_USER, "result": {**USERS[0], "billing": {"stripe_key": STRIPE, "session": JWT, "mailer": SENDGRID}}},
            UPDATE]},
        # The world: the email a postcondition checks holds a secret (a failed check quotes it),
        # and another user's fields changed to secrets (the diff names the paths).
        {**base, "id": "in-world", "calls": [GET_USER, UPDATE], "output": done,
         "world": world((0, "email", BASE64), (1, "api_token", HEX), (2, "twilio", TWILIO))},
        {**base, "id": "in-metadata", "calls": [GET_USER, UPDATE], "output": done, "world": world(),
         "metadata": {"config": {"OPENAI_API_KEY": OPENAI, "telegram": TELEGRAM}},
         "context": {"notes": f"gitlab {GITLAB} discord {DISCORD}"}},
    ]


def leak_forms(secret: str) -> set[bytes]:
    """The secret as it is, JSON-escaped, HTML-escaped and Markdown-escaped (and a key's body lines)."""
    forms = {secret, json.dumps(secret)[1:-1], html.escape(secret, quote=True),
             re.sub(r"([\\`*_\[\]|~])", r"\\\1", secret).replace("&", "&amp;")}
    if secret == PEM:
        forms.update(PEM.splitlines()[1:-1])
    return {form.encode() for form in forms}


def pieces(secret: str, size: int = 12) -> set[bytes]:
    """Every stretch of ``size`` characters of the secret (of a key, of its body lines): what a
    cut through it would leave."""
    parts = PEM.splitlines()[1:-1] if secret == PEM else [secret]
    found = {part[i:i + size] for part in parts for i in range(max(1, len(part) - size + 1))}
    return {form.encode() for piece in found for form in (piece, html.escape(piece, quote=True))}


def cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def safety_available() -> bool:
    code, _ = cli("safety", "--help")
    return code == 0


SAFETY_BUILT = safety_available()


def safety_scan(*args) -> tuple[int, str]:
    """`judgekit safety ARGS...` (another engineer's command): its exit code and what it printed."""
    return cli("safety", *args)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The suite run, reported, recorded, shown and scanned: (folder, its inputs, the outputs)."""
    tmp = tmp_path_factory.mktemp("planted")
    suite = example_suite(tmp / "suite", judge={"model": MODEL, "max_tokens": 512}, rubric_update=JSON_WORLD_RUBRIC,
                          suite_update={"safety": SAFETY_POLICY})
    (suite.parent / "trajectories.jsonl").write_text(
        "".join(json.dumps(t) + "\n" for t in planted_trajectories()), encoding="utf-8")
    inputs = {p: p.read_bytes() for p in tmp.rglob("*") if p.is_file()}
    history, cache = tmp / "history.sqlite", tmp / "cache"
    outputs = {}  # command -> (exit code, what it printed: the log)
    with ScriptedOpenAIServer(scripted_judge) as server:
        judge = ["--judge-model", MODEL, "--judge-api-base", server.base_url, "--cache-dir", cache]
        outputs["run"] = cli("run", suite, *judge, "--history", history, "--record", "--junit", tmp / "junit.xml",
                             "--markdown", tmp / "summary.md", "--html", tmp / "dashboard.html",
                             "--out", tmp / "run.jsonl")
        outputs["rerun"] = cli("run", suite, *judge, "--out", tmp / "run-2.jsonl", "--format", "jsonl")
    run_id = read_run(tmp / "run.jsonl").run_id
    outputs["report"] = cli("report", tmp / "run.jsonl", "--history", history, "--junit", tmp / "report-junit.xml",
                            "--markdown", tmp / "report.md", "--html", tmp / "report.html")
    outputs["history show"] = cli("history", "show", run_id, "--history", history)
    outputs["history list"] = cli("history", "list", "--history", history)
    outputs["cache stats"] = cli("cache", "stats", "--cache-dir", cache)
    if SAFETY_BUILT:
        outputs["safety"] = safety_scan(suite, "--out", tmp / "safety.json", "--junit", tmp / "safety-junit.xml",
                                        "--markdown", tmp / "safety.md", "--html", tmp / "safety.html",
                                        "--history", history, "--record", "--allow-dirty", "--today", "2026-12-01")
    return tmp, inputs, outputs


def written_files(tmp: Path, inputs: dict[Path, bytes]) -> list[Path]:
    """Every file judgekit wrote: new under the folder, or an input it changed."""
    return [p for p in tmp.rglob("*") if p.is_file() and inputs.get(p) != p.read_bytes()]


def test_planted_secrets_of_16_kinds_are_in_no_file_judgekit_wrote_nor_in_what_it_printed(planted):
    tmp, inputs, outputs = planted
    assert len(set(E2E_SECRETS.values())) == 16
    assert outputs["run"][0] == outputs["rerun"][0] == 0, outputs["run"][1]
    assert all(code in (0, 1, 4) for code, _ in outputs.values()), outputs
    written = written_files(tmp, inputs)
    names = {p.relative_to(tmp).as_posix() for p in written}
    assert {"run.jsonl", "run-2.jsonl", "junit.xml", "summary.md", "dashboard.html", "report-junit.xml",
            "report.md", "report.html", "history.sqlite", "cache/cache.db"} <= names, names
    assert any(name.endswith("-wal") for name in names)  # SQLite's write-ahead logs are read too
    terminal = "\n".join(out for _, out in outputs.values()).encode()
    for kind, secret in E2E_SECRETS.items():
        forms = leak_forms(secret)
        for path in written:
            data = path.read_bytes()
            assert not any(form in data for form in forms), f"{kind} is in {path.relative_to(tmp)}"
        assert not any(form in terminal for form in forms), f"{kind} was printed"


SAFETY_FILES = {"safety.json", "safety-junit.xml", "safety.md", "safety.html"}


def history_rows(path: Path, *, safety: bool) -> bytes:
    """The history's rows as text: its safety scans, or every other table."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        chosen = [t for t in tables if t.startswith("safety") == safety]
        return "\n".join(repr(row) for t in chosen for row in conn.execute(f"SELECT * FROM {t}")).encode()
    finally:
        conn.close()


def left_pieces(sources: dict[str, bytes]) -> list[str]:
    return [f"{kind} in {name}" for kind, secret in E2E_SECRETS.items() for name, data in sources.items()
            if any(piece in data for piece in pieces(secret))]


def test_no_piece_of_a_planted_secret_is_left_by_the_run_reports_cache_and_history(planted):
    """Stricter: not even 12 characters of one (what a cut through a secret leaves) in what the
    run, its reports, the cache and the history hold, nor in what those commands printed."""
    tmp, inputs, outputs = planted
    sources = {p.relative_to(tmp).as_posix(): p.read_bytes() for p in written_files(tmp, inputs)
               if p.name not in SAFETY_FILES and not p.name.startswith("history.sqlite")}
    sources["history (runs)"] = history_rows(tmp / "history.sqlite", safety=False)
    sources |= {f"output of {name}": out.encode() for name, (_, out) in outputs.items() if name != "safety"}
    assert left_pieces(sources) == []


@pytest.mark.skipif(not SAFETY_BUILT, reason="judgekit safety not built yet")
def test_no_piece_of_a_planted_secret_is_left_in_the_safety_scans_evidence(planted):
    tmp, _, outputs = planted
    sources = {name: (tmp / name).read_bytes() for name in SAFETY_FILES}
    sources["history (safety scans)"] = history_rows(tmp / "history.sqlite", safety=True)
    sources["output of safety"] = outputs["safety"][1].encode()
    assert left_pieces(sources) == []


def test_the_planted_secrets_reached_the_writers_and_were_masked_there(planted):
    """The masks are there (the secrets were not merely absent), judgekit's digests are whole,
    and only verdicts that quote a secret were kept out of the cache."""
    tmp, _, _ = planted
    record = read_run(tmp / "run.jsonl").model_dump(mode="json")
    text = (tmp / "run.jsonl").read_text(encoding="utf-8")
    by_id = {r["trajectory_id"]: r for r in record["results"]}
    claims = [c["claim"] for c in by_id["in-output"]["axes"]["faithfulness"]["claims"]]
    assert any(claim.startswith(f"Stored {mask_secret(AWS_KEY_ID, 'AWS Access Key')} for you")
               for claim in claims), claims
    reasons = " ".join(c["reason"] for c in by_id["in-world"]["axes"]["task_success"]["checks"])
    assert "email is \"[SECRET Base64 High Entropy String sha256:" in reasons, reasons
    assert "[SECRET Secret Keyword sha256:" in text or "[SECRET Twilio API Key" in text or "[SECRET" in text
    assert by_id["in-metadata"]["metadata"]["config"]["telegram"].startswith("[SECRET Telegram Bot Token sha256:")
    for result in record["results"]:
        judge = result["axes"]["faithfulness"]["judge"]
        assert re.fullmatch("[0-9a-f]{64}", judge["cache_key"])
        assert re.fullmatch("[0-9a-f]{64}", result["rubric_sha256"])
    assert all(re.fullmatch("[0-9a-f]{64}", entry["sha256"]) for entry in record["rubrics"].values())
    second = read_run(tmp / "run-2.jsonl").model_dump(mode="json")
    hits = {r["trajectory_id"] for r in second["results"] if r["axes"]["faithfulness"]["judge"]["cache_hit"]}
    assert "clean" in hits and "in-output" not in hits  # the verdict quoting the key was not cached


@pytest.mark.skipif(not SAFETY_BUILT, reason="judgekit safety not built yet")
def test_the_safety_scan_finds_the_planted_secrets_and_writes_them_masked(planted):
    """`judgekit safety`: it finds the planted secrets (exit 4: stop shipping) and its record,
    reports and history rows hold them masked (the search above covered its files and output)."""
    tmp, _, outputs = planted
    code, out = outputs["safety"]
    assert code == 4, out
    scan = (tmp / "safety.json").read_text(encoding="utf-8")
    assert "secret_exposed" in scan and "detect-secrets" in scan and "[SECRET " in scan
    for name in ("safety-junit.xml", "safety.md", "safety.html"):
        assert (tmp / name).stat().st_size > 0
