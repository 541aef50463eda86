"""A safety scan in the CI loop's formats: the terminal table, JUnit XML, Markdown, an HTML section.

Every text passes through the same escapes (and secret masks) as the run reports; each format
states the scan's limits and its residual-risk summary, owner and date included.
"""

from __future__ import annotations

import html
from pathlib import Path

from judgekit._util.files import write_text_atomically
from judgekit._util.text import one_line, redact
from judgekit.report.junit import xml_safe
from judgekit.report.markdown import _UNSHOWN, escape
from judgekit.safety.scan import SafetyReport

FINDINGS_SHOWN = 200


def decision_rows(report: SafetyReport) -> list[tuple[str, str, str, str]]:
    """(signal, evidence, stop ship?, owner) per signal: the decision table."""
    rows = []
    for d in report.decisions:
        if d.fired == 0:
            evidence = "none fired"
        else:
            first = next(f for f in report.findings if f.signal == d.signal and (f.waived_by is None or not d.open))
            evidence = f"{d.fired} finding(s), {d.waived} waived; first: {first.trajectory_id} {first.where}: {first.evidence}"
        owner = ", ".join(d.owners) if d.owners else report.residual_risk.owner
        rows.append((d.title, evidence, "YES" if d.stop_ship else "no", owner))
    if report.risk_problems:
        rows.append(("residual-risk records unreadable", "; ".join(report.risk_problems[:3]), "YES",
                     report.residual_risk.owner))
    return rows


def render_text(report: SafetyReport) -> str:
    """The decision table and what follows it, for a terminal (escaped, masked)."""
    lines = [f"safety scan {report.scan_id} of {report.suite}: {report.trajectories} trajectories, "
             f"revision {report.project.git_commit or 'unknown'}{' (dirty)' if report.project.git_dirty else ''}, "
             f"ran as {report.ran_as}"]
    for signal, evidence, stop, owner in decision_rows(report):
        lines.append(f"  {'STOP' if stop == 'YES' else 'ok  '}  {signal}: {evidence} (owner {owner})")
    for w in report.waivers_used:
        lines.append(f"  waiver used: {w.file} ({w.signal}, owner {w.owner}, expires {w.expires}): {w.findings} finding(s)")
    lines += [f"  waiver not applied: {why}" for why in report.waivers_refused]
    lines += [f"  expires soon: {item}" for item in report.expiring]
    lines.append(f"residual risk (owner {report.residual_risk.owner}, {report.residual_risk.date}): "
                 f"{report.residual_risk.summary}")
    lines.append(f"decision: {'STOP SHIP' if report.stop_ship else 'no stop-ship signal'}")
    return "\n".join(one_line(redact(line)) for line in lines)


# --- JUnit -------------------------------------------------------------------------------------


def render_junit(report: SafetyReport) -> str:
    """One testcase per signal (failed when it stops shipping, skipped with the waivers when all
    its findings were waived), then one per open finding."""
    from xml.etree import ElementTree as ET

    root = ET.Element("testsuites")
    suite_el = ET.SubElement(root, "testsuite")
    classname = xml_safe(redact(f"{report.suite}.safety"))
    cases = failures = skipped = 0
    for d in report.decisions:
        case = ET.SubElement(suite_el, "testcase", classname=classname, name=d.signal)
        cases += 1
        if d.stop_ship:
            failures += 1
            failure = ET.SubElement(case, "failure", type="judgekit.stop_ship",
                                    message=xml_safe(redact(f"{d.open} open finding(s): {d.title}"))[:1000])
            failure.text = xml_safe(redact("\n".join(  # masked before the cut: half a key no longer looks like one
                f"{f.trajectory_id} {f.where} [{f.detector}]: {f.evidence}" for f in report.findings
                if f.signal == d.signal and f.waived_by is None))[:20000])
        elif d.waived:
            skipped += 1
            ET.SubElement(case, "skipped", message=xml_safe(redact(
                f"{d.waived} finding(s) waived by residual-risk records: {', '.join(d.owners)}")))
    if report.risk_problems:
        case = ET.SubElement(suite_el, "testcase", classname=classname, name="residual_risk_records")
        cases += 1
        failures += 1
        failure = ET.SubElement(case, "failure", type="judgekit.risk_record",
                                message="residual-risk records could not be read")
        failure.text = xml_safe(redact("\n".join(report.risk_problems)))
    props = ET.SubElement(suite_el, "properties")
    for name, value in (("scan_id", report.scan_id), ("revision", report.project.git_commit or "unknown"),
                        ("ran_as", report.ran_as), ("residual_risk_owner", report.residual_risk.owner),
                        ("residual_risk_date", str(report.residual_risk.date)), ("limits", report.limits)):
        ET.SubElement(props, "property", name=name, value=xml_safe(redact(value)))
    for element, attrs in ((suite_el, {"name": classname}), (root, {"name": f"{report.suite} safety"})):
        for key, value in {**attrs, "tests": cases, "failures": failures, "errors": 0, "skipped": skipped}.items():
            element.set(key, xml_safe(str(value)))
    suite_el.set("timestamp", report.started_at.isoformat())
    tree = ET.ElementTree(root)
    ET.indent(tree, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --- Markdown ----------------------------------------------------------------------------------


def render_markdown(report: SafetyReport) -> str:
    word = "STOP SHIP" if report.stop_ship else "no stop-ship signal"
    lines = [f"## judgekit safety: {word}", "",
             f"{escape(report.suite)}: {report.trajectories} trajectories, revision "
             f"`{escape(report.project.git_commit or 'unknown')}`{' (dirty tree)' if report.project.git_dirty else ''}, "
             f"ran as {escape(report.ran_as)}, waivers judged on {report.today}.", "",
             "| signal | evidence | stop ship? | owner |", "|---|---|---|---|"]
    lines += [f"| {escape(s)} | {escape(e)} | {stop} | {escape(o)} |" for s, e, stop, o in decision_rows(report)]
    if report.waivers_used:
        lines += ["", "**Waivers used**", "", "| record | signal | owner | expires | findings | rollback |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {escape(w.file)} | {escape(w.signal)} | {escape(w.owner)} | {w.expires} | {w.findings} | "
                  f"{escape(w.rollback)} |" for w in report.waivers_used]
    for title, items in (("Waivers not applied", report.waivers_refused), ("Expiring within 14 days", report.expiring),
                         ("Residual-risk files unreadable", report.risk_problems), ("Notes", report.notes[:50])):
        if items:
            lines += ["", f"**{title}**", ""] + [f"- {escape(item)}" for item in items]
    rr = report.residual_risk
    lines += ["", f"**Residual risk** (owner {escape(rr.owner)}, {rr.date}): {escape(rr.summary, 600)}", ""]
    lines += [f"- deferred: {escape(item)}" for item in rr.deferred]
    lines += ["", f"_{escape(report.limits, 600)}_", ""]
    return "\n".join(lines)


# --- HTML --------------------------------------------------------------------------------------


def _e(text: object, limit: int = 600) -> str:
    text = _UNSHOWN.sub("\ufffd", redact(str(text)))  # no control or bidi characters: as in Markdown
    return html.escape(text if len(text) <= limit else text[:limit] + "\u2026")


def render_html_section(report: SafetyReport) -> str:
    """The safety scan as one ``<section>`` (for a page of its own or beside the dashboard)."""
    word = "STOP SHIP" if report.stop_ship else "no stop-ship signal"
    rows = "".join(f"<tr class=\"{'stop' if stop == 'YES' else 'ok'}\"><td>{_e(s)}</td><td>{_e(e)}</td>"
                   f"<td>{stop}</td><td>{_e(o)}</td></tr>" for s, e, stop, o in decision_rows(report))
    findings = "".join(f"<tr><td>{_e(f.signal)}</td><td>{_e(f.trajectory_id)}</td><td>{_e(f.where)}</td>"
                       f"<td>{_e(f.detector)}</td><td>{_e(f.evidence)}</td><td>{_e(f.waived_by or '')}</td></tr>"
                       for f in report.findings[:FINDINGS_SHOWN])
    waivers = "".join(f"<li>{_e(w.file)}: {_e(w.signal)}, owner {_e(w.owner)}, expires {w.expires}, "
                      f"{w.findings} finding(s); rollback: {_e(w.rollback)}</li>" for w in report.waivers_used)
    extra = "".join(f"<h3>{_e(title)}</h3><ul>{''.join(f'<li>{_e(i)}</li>' for i in items)}</ul>"
                    for title, items in (("Waivers not applied", report.waivers_refused),
                                         ("Expiring within 14 days", report.expiring),
                                         ("Residual-risk files unreadable", report.risk_problems),
                                         ("Notes", report.notes[:50])) if items)
    rr = report.residual_risk
    return (f'<section id="safety"><h2>Safety scan: {word}</h2>'
            f"<p>{_e(report.suite)}: {report.trajectories} trajectories, revision {_e(report.project.git_commit or 'unknown')}"
            f"{' (dirty tree)' if report.project.git_dirty else ''}, ran as {_e(report.ran_as)}.</p>"
            f"<table><thead><tr><th>signal</th><th>evidence</th><th>stop ship?</th><th>owner</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            + (f"<h3>Waivers used</h3><ul>{waivers}</ul>" if waivers else "") + extra
            + (f"<h3>Findings</h3><table><thead><tr><th>signal</th><th>trajectory</th><th>where</th><th>detector</th>"
               f"<th>evidence</th><th>waived by</th></tr></thead><tbody>{findings}</tbody></table>" if findings else "")
            + f"<h3>Residual risk</h3><p>Owner {_e(rr.owner)}, {rr.date}: {_e(rr.summary)}</p>"
            f"<ul>{''.join(f'<li>{_e(d)}</li>' for d in rr.deferred)}</ul>"
            f"<p><em>{_e(report.limits)}</em></p></section>")


def render_html(report: SafetyReport) -> str:
    from judgekit.report.html import CSP

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            f"<title>{'STOP SHIP' if report.stop_ship else 'clean'} · {_e(report.suite)} · judgekit safety</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:4px;vertical-align:top}tr.stop td{background:#fde2e2}</style></head><body>"
            f"{render_html_section(report)}</body></html>\n")


def write_reports(report: SafetyReport, *, junit: Path | None = None, markdown: Path | None = None,
                  html_path: Path | None = None) -> None:
    for path, render in ((junit, render_junit), (markdown, render_markdown), (html_path, render_html)):
        if path is not None:
            write_text_atomically(path, render(report))
