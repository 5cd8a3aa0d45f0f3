"""Chat templates render in the bounded sandbox exactly as transformers renders them (the default
model's template, and templates using what real ones use), and a template that would take the
machine's memory or time is stopped in one line naming the model and the limit."""

from __future__ import annotations

import re
import time

import pytest
from swiftwriter.chat_template import render_chat, template_ids
from swiftwriter.errors import UserError

MESSAGES = [
    {"role": "system", "content": "Write the next part."},
    {"role": "user", "content": "The sea wall.\n\nWhat happens next: the storm"},
    {"role": "assistant", "content": "The wind rose  "},
]
CONTINUE = {"continue_final_message": True}
PROMPT = {"add_generation_prompt": True}


@pytest.fixture(scope="module")
def word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<s>", "</s>", "<unk>", "the", "sea", "wall", "storm", "wind", "rose"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.name_or_path = "/models/tiny"
    return tokenizer


def with_template(tokenizer, template: str):
    tokenizer.chat_template = template
    return tokenizer


@pytest.mark.default_model
def test_the_default_models_template_gives_transformers_ids():
    from swiftwriter.modelstore import registry
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(registry.default_entry().folder(),
                                              local_files_only=True)  # fmt: skip
    for messages, options in ((MESSAGES, CONTINUE), (MESSAGES[:2], PROMPT)):
        want = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False,
                                             **options)  # fmt: skip
        assert template_ids(tokenizer, messages, **options) == list(want)


# what real templates use: namespaces, loop variables, tests and filters, string methods,
# macros, blocks, the special tokens, tojson, raise_exception, transformers' generation tag
FEATURES = """{{ bos_token }}{% set ns = namespace(system='') %}
{%- macro header(role) %}<|{{ role | upper }}|>{% endmacro %}
{%- for m in messages %}
  {%- if m['role'] == 'system' %}{% set ns.system = m['content'] | trim %}{% continue %}{% endif %}
  {%- if m.role not in ['user', 'assistant'] %}{{ raise_exception('bad role') }}{% endif %}
  {{- header(m.role) ~ '\\n' }}{% if loop.index0 == 1 and ns.system %}[{{ ns.system }}] {% endif %}
  {%- generation %}{{ m.content.split('\\n\\n') | join(' / ') }}{% endgeneration %}
  {%- if not loop.last %}{{ eos_token }}{{ '%s:%d' % ('n', loop.index) }}{% endif %}
{%- endfor %}
{%- set tail %}{{ messages | map(attribute='role') | list | tojson }}{% endset %}
{%- if add_generation_prompt %}{{ tail | length }}{{ header('assistant') }}{% endif %}"""


@pytest.mark.parametrize("options", [CONTINUE, PROMPT], ids=["continue", "prompt"])
def test_what_real_templates_use_renders_as_transformers_renders_it(word_tokenizer, options):
    tokenizer = with_template(word_tokenizer, FEATURES)
    messages = MESSAGES if options is CONTINUE else MESSAGES[:2]
    want = tokenizer.apply_chat_template(messages, tokenize=False, **options)
    assert render_chat(tokenizer, messages, **options) == want
    assert "<|USER|>\n[Write the next part.] The sea wall. / What happens next" in want
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False, **options)
    assert template_ids(tokenizer, messages, **options) == list(ids)


STOPPED = "took more than 1,000,000 steps|ran for more than 1 s"  # which comes first
HOSTILE = {
    # 3 GiB in 4.6 s while compiling, before: Jinja folded the constant
    "folded": ("{{ 'x' * 6000000000 }}", r"str \* int would make 6,000,000,000 characters"),
    # never ended before
    "ranges": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
               "{% endfor %}", STOPPED),
    "string loops": ("{% set s = 'ab' * 50000 %}{% for i in s %}{% for j in s %}{% endfor %}"
                     "{% endfor %}", STOPPED),
    "padding filter": ("{{ 'x' | center(6000000000) }}", r"\|center would make"),
    "format width": ("{{ '{:>6000000000}'.format('x') }}", r"format\(\) would make"),
    "percent width": ("{{ '%6000000000s' % 'x' }}", "str % str would make"),
    "replace": ("{% set s = 'a' * 900000 %}{{ s.replace('a', s) }}", r"replace\(\) would make"),
    "doubling": ("{% set ns = namespace(s='x') %}{% for i in range(60) %}"
                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "~ would make"),
    "one string many times": ("{% set l = ['x' * 900000] * 100000 %}{{ l | join }}",
                              r"\|join would make"),
    "joined generator": ("{% set l = ['x' * 900000] * 100000 %}{{ ''.join(l | select) }}",
                         r"join\(\) would make"),
    "block of literals": ("{% macro m() %}{% for i in range(100000) %}" + "y" * 10000
                          + "{% endfor %}{% endmacro %}{% set v = m() %}", "a block would make"),
    "power": ("{{ 2 ** 1000000000 }}", r"int \*\* int would make"),
    "recursion": ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                  "{% endmacro %}{{ f(40) }}", STOPPED),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_template_past_its_bounds_is_stopped_in_one_line(word_tokenizer, name):
    template, limit = HOSTILE[name]
    tokenizer = with_template(word_tokenizer, template + FEATURES)
    start = time.monotonic()
    with pytest.raises(UserError) as caught:
        template_ids(tokenizer, MESSAGES, **CONTINUE)
    assert time.monotonic() - start < 5  # steps and a deadline stop them, not the machine
    message = str(caught.value)
    assert message.startswith("The chat template of /models/tiny was stopped: ")
    assert re.search(limit, message) and "\n" not in message


def test_a_template_too_long_is_refused(word_tokenizer):
    tokenizer = with_template(word_tokenizer, "{# " + "x" * (64 << 10) + " #}")
    with pytest.raises(UserError, match=r"has 65,542 characters \(limit 65,536\)"):
        render_chat(tokenizer, MESSAGES, **CONTINUE)
