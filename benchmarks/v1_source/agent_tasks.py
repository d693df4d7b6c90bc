"""agent tasks: search + extract + calculator + template to a report meeting a goal checklist."""
from common import step


def s(sid, query):
    return step(sid, "search", query=query, k=3)


def rx(sid, src, pattern, group=1):
    return step(sid, "text_transform", op="extract_regex", text="${%s.output.text}" % src, pattern=pattern, group=group)


def calc(sid, expression):
    return step(sid, "calculator", expression=expression)


def report(text, **values):
    return step("report", "text_transform", op="template", text=text,
                values={k: "${%s.output.text}" % v for k, v in values.items()})


def kw(text):
    return {"type": "keyword", "text": text}


def rxg(pattern):
    return {"type": "regex", "pattern": pattern}


def jk(key, equals=None):
    item = {"type": "json_key", "key": key}
    if equals is not None:
        item["equals"] = equals
    return item


def A(tid, desc, steps, goals):
    return {"id": tid, "desc": desc, "steps": steps, "reference": {"goal_checklist": goals}, "extra_latency": 0.15}


AGE = r"age of (\d+)"


def tasks():
    return [
        A("agent_age_gap_wu_caesar",
          "Who is older, Emperor Wu of Han or Julius Caesar, at death, and what was the age difference? Write a short report.",
          [s("wu", "age of Emperor Wu of Han at death"), s("caesar", "age of Julius Caesar at death"),
           calc("diff", "difference between ${wu.output.text} and ${caesar.output.text}"),
           report("Emperor Wu of Han: {wu}\nJulius Caesar: {caesar}\nAge difference at death: {diff} years.",
                  wu="wu", caesar="caesar", diff="diff")],
          [kw("at the age of 69"), kw("at the age of 55"), rxg(r"difference at death: 14 years")]),
        A("agent_capitals_population_json",
          "Report the populations of Paris, Berlin and Rome in millions and their total as JSON.",
          [s("paris", "population of Paris"), s("berlin", "population of Berlin"), s("rome", "population of Rome"),
           rx("p", "paris", r"about ([\d.]+) million"), rx("b", "berlin", r"about ([\d.]+) million"),
           rx("r", "rome", r"about ([\d.]+) million"),
           calc("total", "round(${p.output.text} + ${b.output.text} + ${r.output.text}, 1)"),
           report('{{"paris_m": {p}, "berlin_m": {b}, "rome_m": {r}, "total_m": {t}}}', p="p", b="b", r="r", t="total")],
          [jk("paris_m", 2.1), jk("berlin_m", 3.7), jk("rome_m", 2.8), jk("total_m", 8.6)]),
        A("agent_scientists_average_age",
          "What was the average age at death of Isaac Newton, Galileo and Charles Darwin? Report each age and the average.",
          [s("newton", "Newton age at death"), s("galileo", "Galileo age at death"), s("darwin", "Charles Darwin age at death"),
           rx("n", "newton", AGE), rx("g", "galileo", AGE), rx("d", "darwin", AGE),
           calc("avg", "(${n.output.text} + ${g.output.text} + ${d.output.text}) / 3"),
           report("Newton died at {n}, Galileo at {g}, Darwin at {d}. Average age at death: {avg} years.",
                  n="n", g="g", d="d", avg="avg")],
          [kw("Newton died at 84"), kw("Galileo at 77"), kw("Darwin at 73"), rxg(r"Average age at death: 78(\.0+)? years")]),
        A("agent_sunlight_seconds",
          "How many seconds does sunlight take to reach the Earth? Show the minutes and seconds you used.",
          [s("light", "time for light from the Sun to reach the Earth"),
           rx("mins", "light", r"(\d+) minutes"), rx("secs", "light", r"(\d+) seconds"),
           calc("total", "${mins.output.text} * 60 + ${secs.output.text}"),
           report("Sunlight takes {m} min {s} s, that is {t} seconds, to reach the Earth.", m="mins", s="secs", t="total")],
          [kw("8 min 20 s"), kw("500 seconds")]),
        A("agent_han_reign",
          "How many years did Emperor Wu of Han reign, from the years his reign began and ended? Report as JSON.",
          [s("reign", "Emperor Wu of Han ruled reign years"),
           rx("start", "reign", r"from (\d+) BC"), rx("end", "reign", r"to (\d+) BC"),
           calc("years", "${start.output.text} - ${end.output.text}"),
           report('{{"ruler": "Emperor Wu of Han", "from_bc": {a}, "to_bc": {b}, "reign_years": {y}}}', a="start", b="end", y="years")],
          [jk("ruler", "Emperor Wu of Han"), jk("from_bc", 141), jk("to_bc", 87), jk("reign_years", 54)]),
        A("agent_olympic_gaps",
          "How many years passed between the two Summer Olympics in Tokyo, and between Beijing's Summer and Winter Games? JSON.",
          [s("tokyo", "Tokyo Olympic Games"), s("beijing", "Beijing Summer Winter Olympic Games"),
           rx("t1", "tokyo", r"in (\d{4}) and"), rx("t2", "tokyo", r"and in (\d{4})"),
           rx("b1", "beijing", r"Games in (\d{4}) and"), rx("b2", "beijing", r"Winter Olympic Games in (\d{4})"),
           calc("tokyo_gap", "${t2.output.text} - ${t1.output.text}"),
           calc("beijing_gap", "${b2.output.text} - ${b1.output.text}"),
           report('{{"tokyo_gap_years": {t}, "beijing_gap_years": {b}}}', t="tokyo_gap", b="beijing_gap")],
          [jk("tokyo_gap_years", 57), jk("beijing_gap_years", 14)]),
        A("agent_conquerors_json",
          "Compare the ages at death of Alexander the Great and Napoleon: JSON with both ages and the difference.",
          [s("alex", "age of Alexander the Great at death"), s("napo", "age of Napoleon at death"),
           rx("a", "alex", AGE), rx("n", "napo", AGE),
           calc("gap", "${n.output.text} - ${a.output.text}"),
           report('{{"alexander": {a}, "napoleon": {n}, "difference": {g}, "older": "Napoleon"}}', a="a", n="n", g="gap")],
          [jk("alexander", 32), jk("napoleon", 51), jk("difference", 19), jk("older", "Napoleon")]),
        A("agent_bittensor_brief",
          "Write a three-point brief on Bittensor (token, roles, tempo) and state its word count.",
          [s("token", "Bittensor subnets TAO token"), s("roles", "miners provide a service validators score"),
           s("tempo", "Bittensor tempo"),
           step("brief", "text_transform", op="template", text="- {a}\n- {b}\n- {c}",
                values={"a": "${token.output.text}", "b": "${roles.output.text}", "c": "${tempo.output.text}"}),
           step("words", "text_transform", op="word_count", text="${brief.output.text}"),
           report("Bittensor brief\n{brief}\nWords: {n}", brief="brief", n="words")],
          [kw("TAO token"), kw("validators score the miners"), kw("tempo"), rxg(r"Words: [1-9]\d+")]),
        A("agent_compound_interest",
          "Compare 1000 TAO compounded for 3 years at 5% and at 4%: both balances (2 decimals) and the gap.",
          [calc("five", "round(1000 * 1.05 ** 3, 2)"), calc("four", "round(1000 * 1.04 ** 3, 2)"),
           calc("gap", "round(${five.output.text} - ${four.output.text}, 2)"),
           report("At 5%: {a} TAO. At 4%: {b} TAO. Gap: {g} TAO.", a="five", b="four", g="gap")],
          [kw("At 5%: 1157.63"), kw("At 4%: 1124.86"), kw("Gap: 32.77")]),
        A("agent_everest_to_moon",
          "How many Mount Everests stacked end to end would reach the Moon? Use the corpus figures; round to a whole number.",
          [s("everest", "height of Mount Everest"), s("moon", "distance from the Earth to the Moon"),
           rx("h", "everest", r"([\d,]+) metres"), rx("d", "moon", r"([\d,]+) kilometres"),
           step("h_num", "text_transform", op="replace", text="${h.output.text}", old=",", new=""),
           step("d_num", "text_transform", op="replace", text="${d.output.text}", old=",", new=""),
           calc("stack", "round(${d_num.output.text} * 1000 / ${h_num.output.text})"),
           report("Everest is {h} m high and the Moon is {d} km away: about {n} Everests.", h="h", d="d", n="stack")],
          [kw("8,849 m"), kw("384,400 km"), kw("43440 Everests")]),
    ]
