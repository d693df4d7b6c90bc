"""``calculator``: safe arithmetic and the English forms task-list plans send."""

import pytest

from subnets.base import ToolContext, ToolError
from subnets.calculator import calculator

CTX = ToolContext(task_id="t", node_id="calc", attempt=1, timeout_seconds=5.0)

WU = "Emperor Wu of Han (156–87 BC) died in 87 BC at the age of 69."
CAESAR = "Julius Caesar (100–44 BC) died in Rome on 15 March 44 BC at the age of 55, stabbed by a group of senators."


async def calc(expression: str, key: str = "expression"):
    return (await calculator({key: expression}, CTX)).output


@pytest.mark.parametrize(
    "expression, text, value",
    [
        ("1 + 2 * 3", "7", 7),
        ("(1 + 2) * 3", "9", 9),
        ("7 / 2", "3.5", 3.5),
        ("8 / 2", "4", 4),  # integral results print without ".0"
        ("7 // 2", "3", 3),
        ("-7 % 3", "2", 2),
        ("2 ** 10", "1024", 1024),
        ("2 ** -1", "0.5", 0.5),
        ("-(3 - 5)", "2", 2),
        ("0.1 + 0.2", "0.3", 0.3),
        ("abs(-4.5)", "4.5", 4.5),
        ("min(3, 1, 2) + max(3, 1, 2)", "4", 4),
        ("round(3.14159, 2)", "3.14", 3.14),
        ("sqrt(16)", "4", 4),
        ("log(1000, 10)", "3", 3),
        ("log(1)", "0", 0),
    ],
)
async def test_arithmetic(expression, text, value):
    output = await calc(expression)
    assert output.text == text
    assert output.artifacts.metadata == {"value": value, "expression": expression}


@pytest.mark.parametrize(
    "expression, refusal",
    [
        ("__import__('os').system('true')", "__import__"),
        ("x + 1", "name 'x'"),
        ("(1).real", "attribute 'real'"),
        ("'a' * 3", "constant 'a'"),
        ("[1, 2]", "List"),
        ("1 < 2", "Compare"),
        ("True + 1", "constant True"),
        ("3 ^ 4", "operator BitXor"),
        ("max(key=abs)", "call"),
        ("lambda: 1", "Lambda"),
        ("2 ** 100000", "exponent"),
        ("9 ** 9 ** 9", "exponent"),
        ("10 ** 200", "exceed"),
        ("1e300 * 1e300", "magnitude"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "negative"),
        ("log(0)", "positive"),
        ("round(2.5, 99)", "digits"),
        ("(-8) ** 0.5", "not a real number"),
        ("1 +", "not an arithmetic expression"),
        ("(" * 300 + "1" + ")" * 300, "not an arithmetic expression"),
        ("+".join(["1"] * 2000), "nested too deeply"),
    ],
)
async def test_refuses_anything_but_bounded_arithmetic(expression, refusal):
    with pytest.raises(ToolError, match=refusal):
        await calc(expression)


@pytest.mark.parametrize(
    "expression, text, normalized",
    [
        ("What is the difference between 10 and 25?", "15", "abs(10 - 25)"),
        ("sum of 1,000 and 2,500", "3500", "1000 + 2500"),
        ("the product of 6 and 7", "42", "6 * 7"),
        ("84 divided by 4", "21", "84 / 4"),
        ("Average of 3, 4 and 8", "5", "(3 + 4 + 8) / 3"),
        ("average of -2; 4", "1", "(-2 + 4) / 2"),
    ],
)
async def test_english_forms(expression, text, normalized):
    output = await calc(expression)
    assert (output.text, output.artifacts.metadata["expression"]) == (text, normalized)


async def test_seed_004_difference_of_two_retrieved_sentences_is_14():
    output = await calc(f"Calculate the difference between {WU} and {CAESAR}", key="query")
    assert output.text == "14"
    assert output.artifacts.metadata == {"value": 14, "expression": "abs(69 - 55)"}


@pytest.mark.parametrize(
    "operand, taken",
    [
        ("The war lasted from 1914 to 1918", "1918"),  # no age: the last number
        ("Aged 80, he retired in 1990", "80"),  # an age wins over a later number
        ("In 2001 the boy was 12 years old", "12"),
        ("His age at death was 41 in 1954", "41"),
        ("the page 12 of 2020", "2020"),  # "page" is not "age"
        ("Population 8,804,190 in 2020", "2020"),
    ],
)
async def test_operand_number_rule(operand, taken):
    output = await calc(f"sum of {operand} and 0")
    assert output.artifacts.metadata["expression"] == f"{taken} + 0"


async def test_an_and_inside_an_operand_does_not_split_it():
    first = "Born in 1900 and died in 1980 at the age of 80"
    output = await calc(f"difference between {first} and Died at the age of 50")
    assert output.artifacts.metadata["expression"] == "abs(80 - 50)"


async def test_operand_without_a_number_is_a_clean_error():
    with pytest.raises(ToolError, match="two operands"):
        await calc("difference between Paris and London")


@pytest.mark.parametrize(
    "params, field",
    [
        ({}, "expression"),
        ({"expression": 12}, "expression"),
        ({"expression": ""}, "expression"),
        ({"expression": "1", "extra": 1}, "extra"),
        ({"expression": "1" * 5000}, "expression"),
    ],
)
async def test_bad_params_name_the_field(params, field):
    with pytest.raises(ToolError, match=field):
        await calculator(params, CTX)
