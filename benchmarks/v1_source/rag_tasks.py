"""rag tasks: parallel sub-queries over benchmarks/corpus, joined by a template."""
from common import step

LETTERS = "abcdefgh"


def rag(tid, question, queries, answer):
    steps = [step(f"q{i + 1}", "search", query=q, k=3) for i, q in enumerate(queries)]
    fields = " ".join("{%s}" % LETTERS[i] for i in range(len(queries)))
    steps.append(step("answer", "text_transform", op="template", text=fields,
                      values={LETTERS[i]: "${q%d.output.text}" % (i + 1) for i in range(len(queries))}))
    return {"id": tid, "desc": question + " Answer from the shipped corpus only.", "steps": steps,
            "reference": {"reference_answer": answer}, "extra_latency": 0.15}


def tasks():
    return [
        rag("rag_ancient_ages", "How old were Julius Caesar and Emperor Wu of Han when they died?",
            ["age of Julius Caesar at death", "age of Emperor Wu of Han at death"],
            "Julius Caesar (100–44 BC) died in Rome on 15 March 44 BC at the age of 55. "
            "Emperor Wu of Han (156–87 BC) died in 87 BC at the age of 69."),
        rag("rag_capital_populations", "What are the populations of Paris, Berlin and Rome?",
            ["population of Paris", "population of Berlin", "population of Rome"],
            "The city of Paris has a population of about 2.1 million people. "
            "Berlin has a population of about 3.7 million people. "
            "Rome has a population of about 2.8 million people."),
        rag("rag_earth_distances", "How far are the Moon and the Sun from the Earth, and how long does sunlight take to arrive?",
            ["distance from the Earth to the Moon", "distance from the Earth to the Sun",
             "time for light from the Sun to reach the Earth"],
            "The Moon's average distance from the Earth is about 384,400 kilometres. "
            "The average distance from the Earth to the Sun is about 149.6 million kilometres. "
            "Light from the Sun takes about 8 minutes and 20 seconds to reach the Earth."),
        rag("rag_water_facts", "What is the formula of water, at what temperatures does it freeze and boil, and why does ice float?",
            ["chemical formula of water H2O", "temperature water boils and freezes", "why does ice float"],
            "Water has the formula H2O, two hydrogen atoms bonded to one oxygen atom. "
            "At standard atmospheric pressure pure water freezes at 0 degrees Celsius and boils at 100 degrees Celsius. "
            "Ice is less dense than liquid water, which is why ice floats."),
        rag("rag_dag_concepts", "What is a DAG, how does Kahn's algorithm order one, and what is its critical path?",
            ["what is a directed acyclic graph", "Kahn's algorithm topological order", "critical path of a DAG"],
            "A directed acyclic graph, or DAG, is a directed graph with no cycles. "
            "Kahn's algorithm, published in 1962, finds a topological order by repeatedly removing vertices with no incoming edges. "
            "The critical path is the longest path through a DAG, and it bounds how fast the whole workflow can finish."),
        rag("rag_nobel_laureates", "Which Nobel Prizes did Marie Curie and Albert Einstein receive?",
            ["Marie Curie Nobel Prizes", "Einstein Nobel Prize"],
            "Marie Curie was the first woman to win a Nobel Prize and the first person to win Nobel Prizes in two sciences, "
            "physics in 1903 and chemistry in 1911. "
            "Einstein received the Nobel Prize in Physics in 1921 for his explanation of the photoelectric effect."),
        rag("rag_everest", "How high is Mount Everest, where is it, and who first climbed it?",
            ["height of Mount Everest", "where is Mount Everest Himalayas", "first ascent of Mount Everest"],
            "The height of Mount Everest is 8,849 metres according to a survey announced in 2020. "
            "It lies in the Himalayas on the border between Nepal and China. "
            "Edmund Hillary and Tenzing Norgay made the first confirmed ascent on 29 May 1953."),
        rag("rag_http_errors", "What do the HTTP status codes 404, 429, 401 and 403 mean?",
            ["HTTP 404 status code", "HTTP 429 status code", "401 and 403 status codes"],
            "The code 404 means Not Found, and 500 means Internal Server Error. "
            "The code 429 means Too Many Requests, sent when a client is rate limited. "
            "The code 401 means the request lacks valid authentication, while 403 means the server refuses to authorise it."),
        rag("rag_silk_road", "How did the Silk Road begin, where did it start, and what was found near that city?",
            ["Zhang Qian Central Asia", "starting point of the Silk Road", "Terracotta Army discovered"],
            "Emperor Wu sent the envoy Zhang Qian to Central Asia, opening contacts that grew into the Silk Road. "
            "Chang'an was the eastern starting point of the Silk Road. "
            "The Terracotta Army was discovered near Xi'an in 1974."),
        rag("rag_moon_landing", "When did Apollo 11 land on the Moon and who walked on it first?",
            ["Apollo 11 landing Moon", "first person to walk on the Moon"],
            "Apollo 11 landed on the Moon on 20 July 1969. "
            "Neil Armstrong was the first person to walk on the Moon, followed by Buzz Aldrin."),
        rag("rag_python_containers",
            "How do append and extend differ on a Python list, how do sorted and sort differ, and do dictionaries keep order?",
            ["append and extend list", "sorted function and sort method", "dictionary insertion order"],
            "The method append adds one item to the end of a list, while extend adds every item of another iterable. "
            "The built-in function sorted returns a new sorted list, while the method sort orders a list in place. "
            "Since Python 3.7, dictionaries keep their keys in insertion order."),
    ]
