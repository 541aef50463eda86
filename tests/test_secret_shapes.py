"""The catalogue of secret shapes (``judgekit._util.secret_shapes``): what ``redact`` masks by shape,
``find_secrets`` reports, under the shape's kind.

For every shape a realistic fake key (assembled at run time from a seeded generator: none is
real, and this file does not look like a leak to a scanner) is masked and found in prose, in a
JSON string, in JSON inside a JSON string, in a URL and next to punctuation; a property test
checks that every stretch a shape matches is inside a finding and masked; look-alikes
(digests, UUIDs, model pins, ``sk-learn``, placeholders) are left alone.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before anything imports litellm

import hashlib
import json
import random
import string
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgekit._util import secret_shapes as _secret_shapes
from judgekit._util.secret_shapes import SHAPES, find_shapes, kinds, may_hold_a_shape
from judgekit._util.text import redact
from judgekit._util.secrets import _MASKED, find_secrets, mask_secret

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
BASE64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def fake(alphabet: str, n: int, seed: str) -> str:
    """``n`` characters from ``alphabet``, the same every run (seeded by ``seed``), holding a
    digit, a capital and a small letter wherever the alphabet has them (as a random key does)."""
    rng = random.Random(seed)
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(n))
        wanted = [cls for cls in (string.digits, string.ascii_uppercase, string.ascii_lowercase)
                  if set(cls) & set(alphabet)]
        if all(set(text) & set(cls) for cls in wanted):
            return text


def hugging_face_body() -> str:
    body = fake(string.ascii_letters, 34, "hf")
    assert sum(c.isupper() for c in body) >= 8
    return body


AWS_KEY_ID = "AKIA" + fake(string.ascii_uppercase + string.digits, 16, "aws-id")
AWS_SECRET = fake(BASE64, 40, "aws-secret")

# (id, the secret, a text holding it ({} is where), the kind find_secrets names it). Each shape
# of the catalogue is the one that matches at least one of these (checked below).
FAKES = [
    ("anthropic_api_key", "sk-ant-api03-" + fake(URLSAFE, 93, "ant") + "AA", "ANTHROPIC_API_KEY={}",
     "Anthropic API Key"),
    ("anthropic_admin_key", "sk-ant-admin01-" + fake(URLSAFE, 93, "ant-admin") + "AA", "admin key: {}",
     "Anthropic API Key"),
    ("openai_project_key", "sk-proj-" + fake(URLSAFE, 74, "oa1") + "T3Blbk" + "FJ" + fake(URLSAFE, 74, "oa2"),
     "export OPENAI_API_KEY={}", "OpenAI Token"),
    ("openai_service_account_key", "sk-svcacct-" + fake(URLSAFE, 58, "sa1") + "T3Blbk" + "FJ" + fake(URLSAFE, 58, "sa2"),
     "the service account uses {}", "OpenAI Token"),
    ("openai_admin_key", "sk-admin-" + fake(URLSAFE, 58, "ad1") + "T3Blbk" + "FJ" + fake(URLSAFE, 58, "ad2"),
     "admin {}", "OpenAI Token"),
    ("litellm_virtual_key", "sk-" + fake(URLSAFE, 22, "litellm"), "proxy key {}", "API Key (sk- prefix)"),
    ("deepseek_style_hex_key", "sk-" + fake(HEX, 32, "deepseek"), "api_base deepseek, key {}",
     "API Key (sk- prefix)"),
    ("openrouter_key", "sk-or-v1-" + fake(HEX, 64, "openrouter"), "OPENROUTER_API_KEY: {}", "API Key (sk- prefix)"),
    ("google_api_key", "AIza" + fake(URLSAFE, 35, "google"), "maps key {}", "Google API Key"),
    ("hugging_face_token", "hf_" + hugging_face_body(), "HF_TOKEN {}", "Hugging Face Token"),
    ("groq_key", "gsk_" + fake(ALNUM, 52, "groq"), "groq {}", "Groq API Key"),
    ("github_fine_grained_token", "github_pat_" + fake(ALNUM, 22, "gh1") + "_" + fake(ALNUM, 59, "gh2"),
     "GH_TOKEN={} gh pr create", "GitHub Token"),
    ("npm_token", "npm_" + fake(ALNUM, 36, "npm"), "NPM_TOKEN {}", "NPM tokens"),
    ("docker_token", "dckr_pat_" + fake(URLSAFE, 27, "docker"), "docker login -p {}", "Docker Personal Access Token"),
    ("slack_app_token", "xapp-1-A0" + fake(string.ascii_uppercase + string.digits, 9, "sa") + "-"
     + fake(string.digits, 13, "sa2") + "-" + fake(HEX, 64, "sa3"), "SLACK_APP_TOKEN={}", "Slack Token"),
    ("slack_refresh_token", "xoxe-1-" + fake(ALNUM, 140, "sr"), "refresh with {}", "Slack Token"),
    ("linear_key", "lin_api_" + fake(ALNUM, 40, "linear"), "linear {}", "Linear API Key"),
    ("notion_token", "ntn_" + fake(string.digits, 11, "n1") + fake(ALNUM, 35, "n2"), "notion {}",
     "Notion Integration Token"),
    ("figma_token", "figd_" + fake(URLSAFE, 40, "figma"), "figma {}", "Figma Token"),
    ("shopify_token", "shpat_" + fake(HEX, 32, "shopify"), "X-Shopify-Access-Token: {}", "Shopify Access Token"),
    ("aws_secret_after_its_key_id", AWS_SECRET, AWS_KEY_ID + ",{}", "AWS Access Key"),
    ("aws_secret_named", fake(BASE64, 40, "aws-named"), "AWS_SECRET_ACCESS_KEY={}", "AWS Access Key"),
    ("cloudflare_token", "cfut_" + fake(ALNUM, 40, "cf") + fake(HEX, 8, "cf2"), "CLOUDFLARE_API_TOKEN={}",
     "Cloudflare API Token"),
    ("databricks_token", "dapi" + fake(HEX, 32, "databricks"), "databricks token {}", "Databricks Token"),
    ("grafana_cloud_token", "glc_" + fake(BASE64, 80, "grafana") + "==", "grafana {}", "Grafana Token"),
    ("grafana_service_account_token", "glsa_" + fake(ALNUM, 32, "glsa") + "_" + fake(HEX, 8, "glsa2"),
     "grafana sa {}", "Grafana Token"),
    ("vault_token", "hvs." + fake(URLSAFE, 95, "vault"), "VAULT_TOKEN={}", "HashiCorp Vault Token"),
    ("tailscale_key", "tskey-auth-" + fake(ALNUM, 12, "ts1") + "-" + fake(ALNUM, 32, "ts2"), "tailscale up --authkey {}",
     "Tailscale Key"),
    ("vercel_token", "vcp_" + fake(ALNUM, 40, "vercel"), "vercel {}", "Vercel Token"),
    ("onepassword_token", "ops_eyJ" + fake(BASE64, 200, "1password") + "fQ==", "OP_SERVICE_ACCOUNT_TOKEN={}",
     "1Password Service Account Token"),
    ("bearer_header", fake(URLSAFE + ".", 48, "bearer"), "Authorization: Bearer {}", "Bearer Token"),
]
FAKE_PARAMS = [pytest.param(secret, template, kind, id=name) for name, secret, template, kind in FAKES]


def in_json(text: str) -> str:
    return json.dumps({"output": text, "n": 1})


def in_json_in_json(text: str) -> str:
    return json.dumps({"result": json.dumps({"note": text})})


def in_url(text: str) -> str:
    return f"GET https://api.example.com/v1/items?page=2&key={text}&sort=asc"


def in_url_in_json(text: str) -> str:
    return in_json(in_url(text))


FORMS = [
    pytest.param(lambda t: t, id="prose"),
    pytest.param(in_json, id="json"),
    pytest.param(in_json_in_json, id="json_in_a_json_string"),
    pytest.param(in_url, id="url"),
    pytest.param(in_url_in_json, id="url_in_json"),
    pytest.param(lambda t: f"({t})", id="in_parentheses"),
    pytest.param(lambda t: f'["{t}",', id="quoted_in_a_list"),
    pytest.param(lambda t: f"<{t}>;", id="in_angle_brackets"),
    pytest.param(lambda t: f"'{t}'!", id="single_quoted"),
    pytest.param(lambda t: f"{t}.\n", id="end_of_sentence"),
]
JSON_FORMS = (in_json, in_json_in_json, in_url_in_json)


def covering(hits, text: str, secret: str):
    """The hits over where ``secret`` is written in ``text`` (JSON-escaped or not)."""
    at = text.find(secret)
    end = at + len(secret)
    return [h for h in hits if h.start < end and at < h.end]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("secret", "template", "kind"), FAKE_PARAMS)
def test_every_shape_is_found_with_its_kind_and_masked(secret, template, kind, form):
    text = form(template.format(secret))
    hits = find_secrets(text)
    over = covering(hits, text, secret)
    assert [h.kind for h in over] == [kind], hits
    assert secret in over[0].value  # the whole key, not a piece of it
    masked = redact(text)
    assert secret not in masked and secret[-12:] not in masked and secret[:16] not in masked, masked
    assert f"[SECRET {kind} sha256:" in masked
    if form in JSON_FORMS:
        json.loads(masked)  # a mask never cuts an escape nor ends a string


def test_every_shape_of_the_catalogue_has_a_fake_it_matches():
    """Each shape is the one that names at least one fake (the tables above are complete)."""
    named = set()
    for _, secret, template, _ in FAKES:
        named |= {id(shape) for shape, _, _ in find_shapes(template.format(secret))}
    assert {id(shape) for shape in SHAPES} <= named, [s.source for s in SHAPES if id(s) not in named]
    assert {kind for *_, kind in FAKES} == set(kinds())


@pytest.mark.parametrize("kind", kinds())
def test_a_kind_fits_the_mask_that_masking_twice_knows(kind):
    """A mask already written is not read again as a secret: its kind must fit ``_MASKED``."""
    assert _MASKED.fullmatch(mask_secret("x", kind))


def test_every_shape_names_its_source():
    for shape in SHAPES:
        assert shape.source.split(" ", 1)[0] in {"secretlint", "documented:", "judgekit:"}, shape.source
        assert shape.prefixes and all(prefix for prefix in shape.prefixes)


@pytest.mark.parametrize(("secret", "template", "kind"), FAKE_PARAMS)
def test_the_same_key_twice_is_masked_twice_with_one_mask(secret, template, kind):
    text = template.format(secret) + " and again: " + template.format(secret)
    masked = redact(text)
    assert secret not in masked
    assert masked.count(mask_secret(secret, kind)) == 2


# --- what redact masks by shape, find_secrets reports --------------------------------------------

JUNK = st.text(alphabet=string.ascii_letters + string.digits + " _-./:=,;\"'\n{}[]()", max_size=30)
PIECES = st.one_of(JUNK, st.sampled_from([template.format(secret) for _, secret, template, _ in FAKES]),
                   st.sampled_from([secret for _, secret, _, _ in FAKES]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, min_size=1, max_size=6), st.booleans())
def test_whatever_a_shape_matches_find_secrets_reports_and_redact_masks(pieces, as_json):
    text = "".join(pieces)
    if as_json:
        text = json.dumps({"output": text})
    hits = find_secrets(text)
    masked = redact(text)
    for shape, start, end in find_shapes(text):
        assert any(h.start <= start and end <= h.end for h in hits), (shape.kind, text[start:end], hits)
        assert text[start:end] not in masked
    for shape in SHAPES:  # the prefilter passes over no match: every pattern run on the whole text
        for match in shape.pattern.finditer(text):
            value = match.group("secret") if "secret" in shape.pattern.groupindex else match.group()
            assert _secret_shapes._placeholder(value) or value not in masked, (shape.kind, value)


# --- look-alikes ---------------------------------------------------------------------------------

DIGEST = hashlib.sha256(b"rubric").hexdigest()
LOOK_ALIKES = [
    pytest.param(f"sha256:{DIGEST} and {hashlib.sha1(b'c').hexdigest()}", id="digests"),
    pytest.param("request 9b2f0c1e-7d4a-4b8e-a3c5-6f1e2d3c4b5a, trace 3F2B8C1E-0A9D-4E7F-B6C5-D4E3F2A1B0C9", id="uuids"),
    pytest.param("scikit-learn (often sk-learn): sk-learn-compatible-estimators, sk-learn-0-24-2-transformers, "
                 "sk-image-processing-pipeline", id="sk_in_prose"),
    pytest.param("the disk-usage-monitoring-dashboard and task-risk-assessment-2024-overview", id="words_holding_sk"),
    pytest.param(json.dumps({"model_pin": f"local/smollm2-135m-instruct@sha256:{DIGEST}",
                             "models": ["openai/gpt-4o-2024-08-06", "anthropic/claude-3-5-sonnet-20241022",
                                        "gemini/gemini-1.5-pro-002", "deepseek/deepseek-chat"]}),
                 id="model_pins"),
    pytest.param("from transformers import 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, hf_hub_download", id="hf_names"),
    pytest.param("Authorization: Bearer $OPENAI_API_KEY; Bearer <YOUR_TOKEN_HERE>; Bearer authentication-over-https",
                 id="bearer_placeholders"),
    pytest.param("AIza" + "X" * 35 + " sk-proj-" + "x" * 40 + "1 hf_" + "X" * 34 + " npm_" + "0" * 36
                 + " github_pat_" + "X" * 40 + " sk-ant-api03-" + "X" * 40, id="placeholders"),
    pytest.param("npm_config_cache=/tmp/npm and xoxo, see you; xapp-store", id="prefixes_in_words"),
    pytest.param('the "SecretAccessKey" field and aws_secret_access_key = "<your secret>"', id="aws_secret_labels"),
    pytest.param("rapid api dapi tskey-auth glc_ lin_api_ ops_ hvs. vcp_", id="bare_prefixes"),
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_not_secrets(text):
    assert find_secrets(text) == []
    assert redact(text) == text


def test_a_commit_after_an_aws_key_id_is_not_its_secret():
    text = f"{AWS_KEY_ID} deployed at commit {hashlib.sha1(b'commit').hexdigest()}"
    assert [h.value for h in find_secrets(text)] == [AWS_KEY_ID]  # the id alone (detect-secrets' detector)


def test_an_aws_secret_is_found_on_the_line_after_its_key_id():
    text = f"key id: {AWS_KEY_ID}\nand the other half: {AWS_SECRET}\n"
    assert AWS_SECRET in [h.value for h in find_secrets(text)]
    far = f"{AWS_KEY_ID}\n\n{AWS_SECRET}\n"  # two lines on: no longer taken for its secret
    assert AWS_SECRET not in [h.value for h in find_secrets(far)]


def test_where_a_detector_and_a_shape_name_the_same_key_it_is_one_finding_of_the_detectors_kind():
    legacy = "sk-" + fake(ALNUM, 20, "legacy1") + "T3Blbk" + "FJ" + fake(ALNUM, 20, "legacy2")
    assert [h.kind for h in find_secrets(f"key {legacy} here")] == ["OpenAI Token"]
    slack = "xoxb-" + fake(string.digits, 12, "s1") + "-" + fake(string.digits, 13, "s2") + "-" + fake(ALNUM, 24, "s3")
    assert [h.kind for h in find_secrets(f"bot {slack}")] == ["Slack Token"]


def test_a_shape_wins_over_an_entropy_finding_of_the_same_key():
    google = next(secret for name, secret, *_ in FAKES if name == "google_api_key")
    assert [h.kind for h in find_secrets(json.dumps({"key": google}))] == ["Google API Key"]


# --- cost and the layering ----------------------------------------------------------------------


def test_text_without_a_long_token_is_passed_over_and_hostile_runs_stay_linear():
    assert not may_hold_a_shape("Done: your email is now alice@example.com. " * 100)
    for hostile in ("sk-" * 40_000, "sk-a" * 30_000, "AIza" * 30_000, "Bearer " * 20_000 + "x1" * 10_000,
                    "AKIA" + "A" * 16 + " " + "a" * 80 + "\n" * 2 + ("/" * 39 + " ") * 2000,
                    "SecretAccessKey=" * 10_000, "-" * 100_000 + "sk-" + "a1" * 50_000):
        started = time.process_time()
        list(find_shapes(hostile))
        assert time.process_time() - started < 1.0, hostile[:20]


def test_the_catalogue_imports_nothing_of_judgekit():
    source = Path(_secret_shapes.__file__).read_text(encoding="utf-8")
    assert "import judgekit" not in source and "from judgekit" not in source
