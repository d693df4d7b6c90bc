"""``default_registry``: the action names planners and benchmark tasks rely on."""

from subnets.llm import LLMConfig
from subnets.registry import default_registry

CORE = {
    "echo",
    "calculator",
    "json_transform",
    "csv_to_json",
    "json_to_csv",
    "text_transform",
    "search",
    "python_exec",
    "split",
    "collect",
}


def test_registers_every_reference_tool_with_a_description():
    registry = default_registry()
    assert set(registry.names()) == CORE
    for name in registry.names():
        spec = registry.get(name)
        assert spec.description and spec.cost_tao >= 0 and spec.latency_s >= 0
    assert [name for name in registry.names() if registry.get(name).frames] == ["split"]  # the one generator


def test_llm_is_registered_only_when_configured():
    assert default_registry().get("llm") is None
    registry = default_registry(llm=LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", cost_per_call=0.01))
    assert set(registry.names()) == CORE | {"llm"}
    assert registry.get("llm").cost_tao == 0.01


def test_each_call_builds_an_independent_registry():
    assert default_registry() is not default_registry()
