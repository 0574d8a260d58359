# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTML report's Jinja2 template: one self-contained page (inline CSS and SVG, no script, no
URL of any kind), readable on screen and printed. Rendered by ``_report_html.render_html``."""

from __future__ import annotations

CSS = """
:root{--ok:#1a7f37;--bad:#c62828;--warn:#b26a00;--ink:#1f2328;--mute:#656d76;--line:#d0d7de;--bg:#f6f8fa}
*{box-sizing:border-box}
body{font:13px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;color:var(--ink);margin:0;background:#fff}
main{max-width:1180px;margin:0 auto;padding:18px 22px 40px}
h1{font-size:20px;margin:0}
h2{font-size:15px;margin:22px 0 8px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:14px;margin:0}
h4{font-size:12px;margin:10px 0 4px;color:var(--mute);text-transform:uppercase;letter-spacing:.04em}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:11.5px}
header.top{display:flex;align-items:center;gap:14px;padding:12px 16px;border-radius:8px;background:var(--bg);border-left:6px solid var(--ok)}
header.top.fail{border-left-color:var(--bad)}
.verdict{font-weight:700;font-size:13px;padding:3px 10px;border-radius:12px;color:#fff;background:var(--ok)}
.fail .verdict,.pill.bad{background:var(--bad)}
.meta{color:var(--mute);font-size:12px}
.tiles{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.tile{flex:1 1 120px;border:1px solid var(--line);border-radius:8px;padding:8px 12px}
.tile b{display:block;font-size:22px}
.tile>span{color:var(--mute);font-size:11.5px}
.tile.bad{border-color:var(--bad)}.tile.bad b{color:var(--bad)}
table{border-collapse:collapse;width:100%;margin:4px 0 8px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:11px;color:var(--mute);text-transform:uppercase;letter-spacing:.03em;background:var(--bg)}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{background:#fdecea}
table.failures td:first-child,table.drift td:first-child,table.cordoned td:first-child{white-space:nowrap}
.gpu svg{display:block}
td.bad,span.bad{color:var(--bad);font-weight:700}
td.ok,span.ok{color:var(--ok)}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:11px;font-weight:700;color:#fff;background:var(--ok)}
.pill.warn{background:var(--warn)}
span.pill.bad,span.pill{color:#fff}
.pill.info{background:#57606a}
section.node{border:1px solid var(--line);border-radius:8px;padding:10px 14px;margin:12px 0;break-inside:avoid-page}
section.node.bad{border-color:var(--bad);border-left:6px solid var(--bad)}
section.node>header{display:flex;gap:10px;align-items:baseline;flex-wrap:wrap}
.gpus{display:flex;flex-wrap:wrap;gap:10px}
.gpu{border:1px solid var(--line);border-radius:6px;padding:6px 8px;background:#fff}
.gpu .cap{font-size:11.5px;color:var(--mute)}
.uuids{margin:2px 0 0;padding:0;list-style:none;font-size:10.5px;color:var(--mute)}
.uuids li.bad{color:var(--bad)}
.charts{display:flex;flex-wrap:wrap;gap:14px}
.chart{font-size:11px}
.mult{font-size:12.5px}
.mult b{font-size:14px}
svg text{font-family:"DejaVu Sans",Arial,sans-serif}
footer{margin-top:26px;color:var(--mute);font-size:11px}
@media print{
  body{font-size:10.5px}
  main{max-width:none;padding:0}
  section.node,tr,.gpu{break-inside:avoid}
  h2{break-after:avoid}
  header.top,tr.bad td,th,.verdict,.pill{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"""

# Macros: a figure with its source (data-src: a JSON pointer into the report data; data-fig: a fleet sum).
MACROS = """
{%- macro f(value, src) -%}<span class="fig" data-src="{{ src }}">{{ value | fig }}</span>{%- endmacro -%}
{%- macro t(value, fig) -%}<span class="fig" data-fig="{{ fig }}">{{ value | fig }}</span>{%- endmacro -%}
{%- macro bars(items, unit) -%}
{%- set top = (items | map(attribute=1) | select | max) or 1 -%}
<svg width="250" height="{{ 18 * (items | length) + 4 }}" role="img">
{%- for label, value, cls, src in items %}
<text x="0" y="{{ 18 * loop.index0 + 13 }}" font-size="10.5" fill="#656d76">{{ label }}</text>
<rect x="92" y="{{ 18 * loop.index0 + 3 }}" width="{{ (100 * value / top) | round(1) if value else 0 }}" height="12" rx="2"
 fill="{{ {'ok': '#1a7f37', 'bad': '#c62828', 'warn': '#d4a72c', 'ref': '#8c959f', 'mute': '#54aeff'}[cls] }}"/>
<text x="{{ 96 + ((100 * value / top) | round(1) if value else 0) }}" y="{{ 18 * loop.index0 + 13 }}" font-size="10.5"
 {% if src %}data-{{ 'fig' if src[0] == '=' else 'src' }}="{{ src[1:] if src[0] == '=' else src }}"{% endif %}>
{{ value | fig if value is not none else '-' }} {{ unit }}</text>
{%- endfor %}
</svg>
{%- endmacro -%}
"""

GPU = """
{%- macro grid(items, slices, checked, caption) -%}
{%- set cw = 472 / slices -%}
<svg width="480" height="{{ 62 if caption else 48 }}" role="img" aria-label="{{ caption or 'MIG instances' }}">
<rect x="4" y="4" width="472" height="42" rx="4" fill="#f6f8fa" stroke="#d0d7de"/>
{%- for s in range(1, slices) %}<line x1="{{ 4 + cw * s }}" y1="4" x2="{{ 4 + cw * s }}" y2="46" stroke="#d0d7de" stroke-dasharray="2,2"/>{% endfor %}
{%- for i in items if i.start is not none and i.size %}
{%- set x = 5 + cw * i.start -%}{%- set w = cw * i.size - 2 -%}{%- set missing = checked and not i.found -%}
<g><title>{{ i.profile }} at memory slice {{ i.start }}{{ (', ' ~ i.uuid) if i.uuid else '' }}</title>
<rect x="{{ x }}" y="5" width="{{ w }}" height="40" rx="3"
 fill="{{ '#fff' if missing else ['#54aeff', '#0969da', '#8250df', '#bf3989', '#0a3069', '#1b7c83', '#6639ba', '#953800'][((i.compute_slices or 1) - 1) % 8] }}"
 stroke="{{ '#c62828' if missing else '#fff' }}"{{ ' stroke-dasharray="4,3"' | safe if missing else '' }}/>
<text x="{{ x + w / 2 }}" y="23" text-anchor="middle" font-size="{{ 11 if i.size > 1 else 9.5 }}" font-weight="700"
 fill="{{ '#c62828' if missing else '#fff' }}">{{ i.profile if i.size > 1 or i.profile | length < 8 else i.profile.split('.')[0] }}</text>
<text x="{{ x + w / 2 }}" y="37" text-anchor="middle" font-size="8.5" fill="{{ '#c62828' if missing else '#eaeef2' }}">
{{ i.uuid[4:12] if i.uuid else ('missing' if missing else 'planned') }}</text></g>
{%- endfor %}
{%- if caption %}<text x="6" y="58" font-size="9" fill="#c62828">{{ caption }}</text>{% endif %}
</svg>
{%- endmacro -%}
{%- macro gpu_svg(gpu, replicas) -%}
{%- if gpu.mig and gpu.memory_slices -%}
{%- set missing = gpu.uuid is not none and gpu.instances | selectattr('found', 'sameas', false) | list | length > 0 -%}
{{ grid(gpu.instances, gpu.memory_slices, gpu.uuid is not none, "planned (the planner's placement); dashed: not on the host" if missing else '') }}
{%- if gpu.other %}{{ grid(gpu.other, gpu.memory_slices, false, 'found on the host instead') }}{% endif %}
{%- else -%}
{%- set n = replicas or 1 -%}
<svg width="480" height="48" role="img" aria-label="GPU {{ gpu.index }}">
{%- for r in range(n) %}
<rect x="{{ 5 + 470 / n * r }}" y="5" width="{{ 470 / n - 2 }}" height="40" rx="3" fill="{{ '#1a7f37' if n == 1 else '#2da44e' }}"/>{% endfor %}
{%- for r in range(n) %}<text x="{{ 5 + 470 / n * (r + 0.5) }}" y="{{ 24 if n == 1 else 30 }}" text-anchor="middle"
 font-size="{{ 12 if n == 1 else 11 }}" font-weight="700" fill="#fff">{{ 'whole GPU' if n == 1 else 'replica ' ~ (r + 1) }}</text>{% endfor %}
{%- if n == 1 %}
<text x="240" y="38" text-anchor="middle" font-size="9" fill="#eaeef2">{{ 'MIG disabled' if not gpu.mig else 'MIG layout not known' }}</text>{% endif %}
</svg>
{%- endif -%}
{%- endmacro -%}
"""

PAGE = MACROS + GPU + """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ v.title or 'GPU fleet report' }}{{ (' - run ' ~ v.run_id) if v.run_id else '' }}</title>
<style>{{ css | safe }}</style></head>
<body><main>
<header class="top{{ '' if v.ok else ' fail' }}" id="verdict" data-ok="{{ 'true' if v.ok else 'false' }}">
<span class="verdict">{{ 'PASSED' if v.ok else 'FAILED' }}</span>
<div><h1>{{ v.title or 'GPU fleet report' }}</h1>
<div class="meta">{% if v.run_id %}verification run <code>{{ v.run_id }}</code>{% endif %}
{% if v.rollout and v.rollout.run %} &middot; rollout <code>{{ v.rollout.run }}</code>{% endif %}
{% if v.generated %} &middot; {{ v.generated }}{% endif %}</div></div>
</header>
{% if v.has_verify %}
<div class="tiles">
<div class="tile"><b>{{ f(v.summary.nodes, '/summary/nodes') }}</b><span>nodes verified</span></div>
<div class="tile"><b>{{ t(v.gpu_count, 'gpus') }}</b><span>GPUs</span></div>
<div class="tile"><b>{{ f(v.summary.checks, '/summary/checks') }}</b><span>checks</span></div>
<div class="tile{{ ' bad' if v.summary.failed else '' }}"><b>{{ f(v.summary.failed, '/summary/failed') }}</b><span>failed checks</span></div>
<div class="tile{{ ' bad' if v.summary.failed_nodes else '' }}"><b>{{ t(v.summary.failed_nodes | length, 'failed_nodes') }}</b>
<span>failing nodes</span></div>
{% if v.rollout %}<div class="tile{{ ' bad' if v.rollout.cordoned else '' }}"><b>{{ t(v.rollout.cordoned | length, 'cordoned') }}</b>
<span>left cordoned by the rollout</span></div>{% endif %}
</div>
{% endif %}
{% if v.drift %}
<h2 id="drift">Drift <span class="pill bad">{{ v.drift | length }}</span></h2>
<table class="drift"><tr><th>Node</th><th>What</th><th>Planned</th><th>Found</th><th>Since</th><th>Converge with</th></tr>
{% for r in v.drift %}<tr class="bad" data-failed="true" data-node="{{ r.node }}"><td>{{ r.node }}</td><td>{{ r.what }}</td>
<td class="mono" data-src="{{ r.src }}/planned">{{ r.planned }}</td><td class="mono bad" data-src="{{ r.src }}/found">{{ r.found }}</td>
<td>{{ r.since if r.since is not none else '-' }}</td><td class="mono">{{ r.converge }}</td></tr>
{% endfor %}</table>
{% endif %}
{% if v.failed_checks or (v.rollout and (v.rollout.cordoned or v.rollout.stopped_early)) %}
<h2 id="failures">Failures</h2>
{% if v.rollout and v.rollout.stopped_early %}<p class="bad">
<span class="pill bad">rollout stopped early</span> a batch failed over its budget; later batches were not started.</p>{% endif %}
{% if v.failed_checks %}
<table class="failures"><tr><th>Node</th><th>Check</th><th>Planned</th><th>Found</th><th>What is wrong</th></tr>
{% for c in v.failed_checks %}<tr class="bad" data-failed="true" data-node="{{ c.node }}">
<td>{% if loop.first or loop.previtem.node != c.node %}<a href="#node-{{ c.node }}">{{ c.node }}</a>{% endif %}</td><td>
{{ c.kind }} <code>{{ c.name }}</code></td>
<td class="mono" data-src="{{ c.src }}/expected">{{ c.expected }}</td><td class="mono bad" data-src="{{ c.src }}/actual">{{ c.actual }}</td><td>
{{ c.message }}</td></tr>
{% endfor %}</table>
{% endif %}
{% if v.rollout and v.rollout.cordoned %}
<h4>Nodes the rollout left cordoned</h4>
<table class="cordoned"><tr><th>Node</th><th>Outcome</th><th>Why</th></tr>
{% for r in v.rollout.cordoned %}<tr class="bad" data-failed="true" data-node="{{ r.node }}"><td>{{ r.node }}</td><td data-src="{{ r.src }}/outcome">
{{ r.outcome }}</td><td>{{ r.reason }}</td></tr>{% endfor %}
</table>
{% endif %}
{% endif %}
"""

PAGE += """
{% if v.fleet %}
<h2 id="fleet">Fleet at a glance</h2>
<table class="fleet"><tr><th>Resource</th><th class="num">Nodes</th><th class="num">Physical units</th><th class="num">Schedulable after sharing</th>
<th class="num">Advertised</th></tr>
{% for r in v.fleet %}<tr class="{{ '' if r.ok else 'bad' }}"{{ ' data-failed="true"' | safe if not r.ok else '' }}><td><code>{{ r.resource }}</code>
</td>
<td class="num">{{ t(r.nodes, 'fleet/' ~ r.resource ~ '/nodes') }}</td><td class="num">{{ t(r.before, 'fleet/' ~ r.resource ~ '/before') }}</td>
<td class="num"><b>{{ t(r.after, 'fleet/' ~ r.resource ~ '/after') }}</b></td>
<td class="num{{ '' if r.advertised == r.after else ' bad' }}">{{ t(r.advertised, 'fleet/' ~ r.resource ~ '/advertised') }}</td></tr>
{% endfor %}</table>
{% endif %}
{% if v.rollout %}
<h2 id="rollout">Rollout</h2>
<p class="meta">{% for name, count in v.rollout.outcomes %}
<span class="pill {{ 'bad' if name in ('failed', 'unreachable') else 'warn' if name == 'not started' else '' }}">{{ count }} {{ name }}
</span> {% endfor %}
{% if v.rollout.batches %}<span class="pill info">{{ t(v.rollout.batches, 'batches') }} batch{{ 'es' if v.rollout.batches != 1 else '' }}</span>{% endif %}
{% if v.rollout.stopped_early %}<span class="pill bad">stopped early</span>{% endif %}</p>
<table class="rollout"><tr><th>Node</th><th class="num">Batch</th><th>Outcome</th><th>GPUs changed</th><th>Reason</th></tr>
{% for r in v.rollout.rows %}
<tr class="{{ 'bad' if r.failed else '' }}"{{ ' data-failed="true"' | safe if r.failed else '' }} data-node="{{ r.node }}"><td>{{ r.node }}</td>
<td class="num">{{ f(r.batch, r.src ~ '/batch') if r.get('batch') is not none else '-' }}</td>
<td data-src="{{ r.src }}/outcome">{{ r.outcome }}</td><td class="mono">
{% for g in r.gpus or [] %}GPU {{ f(g, r.src ~ '/gpus/' ~ loop.index0) }}{{ ', ' if not loop.last else '' }}{% else %}-{% endfor %}</td><td>
{{ r.reason or '' }}</td></tr>
{% endfor %}</table>
{% endif %}
{% if v.nodes %}<h2 id="nodes">Nodes</h2>{% endif %}
{% for n in v.nodes %}
<section class="node{{ '' if n.ok else ' bad' }}" id="node-{{ n.name }}" data-node="{{ n.name }}" data-failed="{{ 'false' if n.ok else 'true' }}">
<header><h3>{{ n.name }}</h3><span class="pill{{ '' if n.ok else ' bad' }}">{{ 'OK' if n.ok else 'FAIL' }}</span>
<span class="meta">{{ n.product or 'unknown product' }} &middot; MIG strategy {{ n.mig_strategy }} &middot; sharing {{ n.sharing }}
{%- if n.config %} (config <code>{{ n.config }}</code>){% endif %} &middot; {{ n.passed }}/{{ n.total }} checks passed</span></header>
{% if n.gpus %}<h4>GPUs</h4><div class="gpus">
{% for g in n.gpus %}<div class="gpu" data-gpu="{{ g.index }}" data-uuid="{{ g.uuid or '' }}">
<div class="cap"><b>GPU {{ f(g.index, g.src ~ '/index') }}</b> {{ g.name or g.model or '' }}{% if g.uuid %} &middot; <code>{{ g.uuid }}</code>
{% endif %}</div>
{{ gpu_svg(g, (n.resources | selectattr('resource', 'eq', 'nvidia.com/gpu') | map(attribute='replicas') | first) if not g.mig else 1) }}
{% if g.instances %}<ul class="uuids">{% for i in g.instances %}
<li class="{{ '' if i.found or not g.uuid else 'bad' }}"{{ ' data-failed="true"' | safe if g.uuid and not i.found else '' }}>
{{ i.profile }} @ slice {{ f(i.start, g.src ~ '/instances/' ~ loop.index0 ~ '/start') }}:
 {{ i.uuid or ('planned, not found on the host' if g.uuid else 'planned') }}</li>{% endfor %}
{% for o in g.other %}<li class="bad" data-failed="true">found, not planned: {{ o.profile }} @ slice {{ o.start }} {{ o.uuid or '' }}</li>{% endfor %}
</ul>{% endif %}
{% if g.problem %}<div class="bad">{{ g.problem }}</div>{% endif %}
</div>{% endfor %}</div>{% endif %}
<h4>Planned against advertised</h4>
<table class="resources"><tr><th>Resource</th><th class="num">Physical</th><th>Sharing</th><th class="num">Planned</th><th class="num">Capacity</th>
<th class="num">Allocatable</th></tr>
{% for r in n.resources %}<tr class="{{ '' if r.ok else 'bad' }}"{{ ' data-failed="true"' | safe if not r.ok else '' }}><td><code>{{ r.planned_name }}
</code></td>
<td class="num">{{ f(r.count, r.count_src) if r.count is not none else '-' }}</td>
<td class="mult">{% if (r.replicas or 1) > 1 %}&times; {{ f(r.replicas, r.replicas_src) }} {{ r.strategy }}
{%- if r.strategy == 'mps' %} <span class="meta">(each client capped at {{ (100 / r.replicas) | round(1) }} % of the threads
 and 1/{{ r.replicas }} of the memory)</span>{% endif %}{% else %}-{% endif %}</td>
<td class="num"><b>{{ f(r.planned, r.planned_src) }}</b></td>
{% for kind in ('capacity', 'allocatable') %}<td class="num{{ '' if r[kind ~ '_ok'] else ' bad' }}">
{{ f(r[kind], r[kind ~ '_src']) if r[kind] is not none else '-' }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% if n.failed_checks %}<h4>What differs</h4><ul>{% for c in n.failed_checks %}<li class="bad" data-failed="true">{{ c.message }}</li>{% endfor %}
</ul>{% endif %}
{% if n.pods %}<h4>Verification pods</h4>
<table class="pods"><tr><th>Pod</th><th>Resource</th><th>Asked for</th><th>Saw</th><th>Outcome</th><th class="num">Seconds</th></tr>
{% for p in n.pods %}<tr class="{{ '' if p.ok else 'bad' }}"{{ ' data-failed="true"' | safe if not p.ok else '' }}><td class="mono">{{ p.name }}</td>
<td><code>{{ p.resource }}</code></td><td>{{ p.expected }}</td>
<td class="{{ 'ok' if p.ok else 'bad' }}"{% if p.saw_src %} data-src="{{ p.saw_src }}"{% endif %}>{{ p.saw or p.reason or '' }}</td><td>
{{ p.outcome }}</td><td class="num">{{ f(p.seconds, p.src ~ '/seconds') if p.seconds is not none else '-' }}</td></tr>
{% endfor %}</table>{% endif %}
{% if n.probe %}<h4>Sharing probe</h4>
{% for r in n.probe %}<div class="meta"><code>{{ r.resource }}
</code> &middot; {{ r.sharing }} &times; {{ f(r.replicas, r.src ~ '/replicas') }} &middot; {{ r.device }} ({{ r.backend }})
{% if r.share is not none %} &middot; share of fair {{ f(r.share, r.src ~ '/share') }}{% endif %}
{%- if r.inflation is not none %} &middot; latency &times;{{ f(r.inflation, r.src ~ '/inflation') }}{% endif %}</div>
<div class="charts">
<div class="chart"><b>Throughput per replica</b> (TFLOP/s)<br>
{{ bars([('alone', r.exclusive_tflops, 'mute', r.src ~ '/exclusive_tflops'), ('fair share', r.fair_tflops, 'ref', '=fair' ~ r.src)]
        + ([('per replica', r.shared_tflops, 'ok' if r.share is none or r.share >= 0.8 else 'bad', r.src ~ '/shared_tflops')]
           if r.shared_tflops is not none else []), '') }}</div>
{% if r.shared_ms is not none %}<div class="chart"><b>Latency</b> (ms, small kernel)<br>
{{ bars([('alone', r.exclusive_ms, 'mute', r.src ~ '/exclusive_ms'),
        ('shared', r.shared_ms, 'bad' if (r.inflation or 0) > 2 else 'ok', r.src ~ '/shared_ms')], 'ms') }}</div>{% endif %}
<div class="chart"><b>Memory per sharer</b> (MiB)<br>
{{ bars([('allocatable', r.memory_allocatable_mib, 'ok' if r.isolation != 'no' else 'warn', r.src ~ '/memory_allocatable_mib'),
        ('1/N of total', r.memory_fair_mib, 'ref', '=memfair' ~ r.src)], '') }}</div>
</div>{% endfor %}{% endif %}
</section>
{% endfor %}
<footer>Written by gpufleet.sharing from the same data as the JSON report{% if v.run_id %} (<code>gpufleet-verify.json</code>){% endif %}
{%- if v.rollout %} and <code>rollout-summary.json</code>{% endif %}. Self-contained: no script, no network request.</footer>
</main></body></html>
"""
