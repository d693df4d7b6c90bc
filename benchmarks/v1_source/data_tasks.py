"""data_transform tasks: CSV -> JSON -> ops; expected output computed here in plain Python."""
import csv, io
from common import step

def rows(text):
    out = []
    for r in csv.DictReader(io.StringIO(text)):
        out.append({k: _num(v) for k, v in r.items()})
    return out

def _num(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v

def meta(sid):
    return "${%s.output.artifacts.metadata.result}" % sid

SALES = """region,product,units,price
north,widget,12,2.5
south,gadget,7,10.0
east,widget,15,2.5
west,gizmo,22,4.0
north,gizmo,3,4.0
south,widget,18,2.5
east,gadget,11,10.0
west,widget,9,2.5
"""
EMPLOYEES = """name,dept,salary,years
Ada,eng,120000,7
Grace,eng,135000,12
Linus,ops,90000,4
Margaret,eng,128000,9
Ken,ops,95000,15
Barbara,research,140000,20
Dennis,research,118000,6
"""
WEATHER = """city,day,temp_c,rain_mm
Oslo,mon,4,2.5
Oslo,tue,6,0
Lima,mon,19,0
Lima,tue,21,0
Pune,mon,31,12.0
Pune,tue,29,8.5
Oslo,wed,3,4.0
"""
INVENTORY = """sku,item,stock,warehouse
A1,bolt,120,lyon
A2,nut,0,lyon
B1,gear,35,porto
B2,belt,0,porto
C1,valve,8,lyon
C2,pump,2,gdansk
C3,seal,64,gdansk
"""
PRICES = """sku,unit_price
A1,0.1
A2,0.05
B1,4.5
B2,7.25
C1,12.0
C2,89.0
C3,0.8
"""
GRADES = """student,course,score
amir,math,88
bea,math,92
chen,math,75
amir,physics,81
bea,physics,67
chen,physics,94
dara,math,59
dara,physics,71
"""
FLIGHTS = """flight,origin,dest,minutes_late,status
DN101,OSL,LIS,0,landed
DN102,LIS,OSL,45,landed
DN203,OSL,ROM,12,landed
DN204,ROM,OSL,0,cancelled
DN305,LIS,ROM,95,landed
DN306,ROM,LIS,5,landed
DN407,OSL,LIS,30,cancelled
"""
BOOKS = """title;author;year;genre
Dune;Herbert;1965;scifi
Emma;Austen;1815;classic
Neuromancer;Gibson;1984;scifi
Persuasion;Austen;1817;classic
Hyperion;Simmons;1989;scifi
Ulysses;Joyce;1922;classic
Foundation;Asimov;1951;scifi
"""
SERVERS = """host,region,cpu_pct,healthy
web-1,eu,91,no
web-2,eu,35,yes
web-3,us,78,yes
db-1,us,95,no
db-2,eu,22,yes
cache-1,ap,64,yes
cache-2,ap,88,no
"""
ORDERS = """order_id,customer,total
o1,acme,250
o2,globex,75
o3,acme,125
o4,initech,300
o5,globex,50
o6,acme,80
"""
CUSTOMERS = """customer,country,tier
acme,fr,gold
globex,de,silver
initech,us,gold
"""

def obj_schema(props):
    return {"type": "object", "required": list(props), "properties": props, "additionalProperties": False}

ARR = {"type": "array"}
NUM = {"type": "number"}
OBJ = {"type": "object"}



def T(tid, desc, steps, expected, schema):
    return dict(id=tid, desc=desc, steps=steps, expected=expected, schema=schema)


def report(**parts):
    return step("report", "json_transform", data={k: meta(v) for k, v in parts.items()}, ops=[])


def tasks():
    out = []
    s = rows(SALES)
    top = sorted([r for r in s if r["units"] > 10], key=lambda r: r["units"], reverse=True)[:3]
    out.append(T("dt_sales_summary",
        "From the sales CSV, list the three best-selling order lines above 10 units (product and units), "
        "count orders per region and total the units.",
        [step("parse", "csv_to_json", csv=SALES, numeric=True),
         step("top", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "units", "gt": 10}, {"op": "sort", "key": "units", "reverse": True}, {"op": "pick", "fields": ["product", "units"]}, {"op": "limit", "n": 3}]),
         step("regions", "json_transform", data=meta("parse"), ops=[{"op": "group_count", "field": "region"}]),
         step("units", "json_transform", data=meta("parse"), ops=[{"op": "sum", "field": "units"}]),
         report(top_sellers="top", orders_per_region="regions", units_total="units")],
        {"top_sellers": [{"product": r["product"], "units": r["units"]} for r in top],
         "orders_per_region": {k: sum(1 for r in s if r["region"] == k) for k in {r["region"] for r in s}},
         "units_total": sum(r["units"] for r in s)},
        obj_schema({"top_sellers": ARR, "orders_per_region": OBJ, "units_total": NUM})))

    e = rows(EMPLOYEES)
    eng = sorted([r for r in e if r["dept"] == "eng"], key=lambda r: r["salary"], reverse=True)
    out.append(T("dt_employee_roster",
        "From the staff CSV: engineers by salary (highest first, name and salary), the total payroll, "
        "and staff with more than 10 years of service (name, years).",
        [step("parse", "csv_to_json", csv=EMPLOYEES, numeric=True),
         step("eng", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "dept", "eq": "eng"}, {"op": "sort", "key": "salary", "reverse": True}, {"op": "pick", "fields": ["name", "salary"]}]),
         step("payroll", "json_transform", data=meta("parse"), ops=[{"op": "sum", "field": "salary"}]),
         step("veterans", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "years", "gt": 10}, {"op": "pick", "fields": ["name", "years"]}]),
         report(engineers="eng", payroll="payroll", veterans="veterans")],
        {"engineers": [{"name": r["name"], "salary": r["salary"]} for r in eng],
         "payroll": sum(r["salary"] for r in e),
         "veterans": [{"name": r["name"], "years": r["years"]} for r in e if r["years"] > 10]},
        obj_schema({"engineers": ARR, "payroll": NUM, "veterans": ARR})))

    w = rows(WEATHER)
    seen = []
    for r in w:
        if {"city": r["city"]} not in seen:
            seen.append({"city": r["city"]})
    out.append(T("dt_weather_digest",
        "Weather log: which (city, day) pairs had rain, which city had the hottest reading, "
        "and the distinct cities in first-seen order.",
        [step("parse", "csv_to_json", csv=WEATHER, numeric=True),
         step("rainy", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "rain_mm", "gt": 0}, {"op": "pick", "fields": ["city", "day"]}]),
         step("hottest", "json_transform", data=meta("parse"), ops=[{"op": "sort", "key": "temp_c", "reverse": True}, {"op": "get", "path": "0.city"}]),
         step("cities", "json_transform", data=meta("parse"), ops=[{"op": "pick", "fields": ["city"]}, {"op": "unique"}]),
         report(rainy_days="rainy", hottest="hottest", cities="cities")],
        {"rainy_days": [{"city": r["city"], "day": r["day"]} for r in w if r["rain_mm"] > 0],
         "hottest": max(w, key=lambda r: r["temp_c"])["city"], "cities": seen},
        obj_schema({"rainy_days": ARR, "hottest": {"type": "string"}, "cities": ARR})))

    inv, pr = rows(INVENTORY), rows(PRICES)
    out.append(T("dt_inventory_restock",
        "Two CSVs (stock per warehouse, unit prices): list out-of-stock SKUs with their item, "
        "count SKUs per warehouse, and list SKUs priced above 5.",
        [step("parse_stock", "csv_to_json", csv=INVENTORY, numeric=True),
         step("parse_prices", "csv_to_json", csv=PRICES, numeric=True),
         step("empty", "json_transform", data=meta("parse_stock"), ops=[{"op": "filter", "field": "stock", "eq": 0}, {"op": "pick", "fields": ["sku", "item"]}]),
         step("per_wh", "json_transform", data=meta("parse_stock"), ops=[{"op": "group_count", "field": "warehouse"}]),
         step("pricey", "json_transform", data=meta("parse_prices"), ops=[{"op": "filter", "field": "unit_price", "gt": 5}, {"op": "sort", "key": "unit_price", "reverse": True}]),
         report(out_of_stock="empty", skus_per_warehouse="per_wh", premium_skus="pricey")],
        {"out_of_stock": [{"sku": r["sku"], "item": r["item"]} for r in inv if r["stock"] == 0],
         "skus_per_warehouse": {k: sum(1 for r in inv if r["warehouse"] == k) for k in {r["warehouse"] for r in inv}},
         "premium_skus": sorted([r for r in pr if r["unit_price"] > 5], key=lambda r: r["unit_price"], reverse=True)},
        obj_schema({"out_of_stock": ARR, "skus_per_warehouse": OBJ, "premium_skus": ARR})))

    g = rows(GRADES)
    math_ = sorted([r for r in g if r["course"] == "math"], key=lambda r: r["score"], reverse=True)
    out.append(T("dt_grade_board",
        "Grades CSV: the math ranking (student, score, best first), all failing results (score under 70) "
        "as student/course pairs, and the sum of physics scores.",
        [step("parse", "csv_to_json", csv=GRADES, numeric=True),
         step("math_rank", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "course", "eq": "math"}, {"op": "sort", "key": "score", "reverse": True}, {"op": "pick", "fields": ["student", "score"]}]),
         step("failing", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "score", "lt": 70}, {"op": "pick", "fields": ["student", "course"]}]),
         step("physics", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "course", "eq": "physics"}, {"op": "sum", "field": "score"}]),
         report(math_ranking="math_rank", failing="failing", physics_total="physics")],
        {"math_ranking": [{"student": r["student"], "score": r["score"]} for r in math_],
         "failing": [{"student": r["student"], "course": r["course"]} for r in g if r["score"] < 70],
         "physics_total": sum(r["score"] for r in g if r["course"] == "physics")},
        obj_schema({"math_ranking": ARR, "failing": ARR, "physics_total": NUM})))

    f = rows(FLIGHTS)
    landed = [r for r in f if r["status"] == "landed"]
    out.append(T("dt_flight_delays",
        "Flight log: landed flights more than 10 minutes late (flight, minutes_late, worst first), "
        "flights per origin airport, and the number of cancelled flights.",
        [step("parse", "csv_to_json", csv=FLIGHTS, numeric=True),
         step("late", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "status", "eq": "landed"}, {"op": "filter", "field": "minutes_late", "gt": 10}, {"op": "sort", "key": "minutes_late", "reverse": True}, {"op": "pick", "fields": ["flight", "minutes_late"]}]),
         step("origins", "json_transform", data=meta("parse"), ops=[{"op": "group_count", "field": "origin"}]),
         step("cancelled", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "status", "eq": "cancelled"}, {"op": "count"}]),
         report(late_landings="late", flights_per_origin="origins", cancelled="cancelled")],
        {"late_landings": [{"flight": r["flight"], "minutes_late": r["minutes_late"]} for r in sorted([r for r in landed if r["minutes_late"] > 10], key=lambda r: r["minutes_late"], reverse=True)],
         "flights_per_origin": {k: sum(1 for r in f if r["origin"] == k) for k in {r["origin"] for r in f}},
         "cancelled": sum(1 for r in f if r["status"] == "cancelled")},
        obj_schema({"late_landings": ARR, "flights_per_origin": OBJ, "cancelled": {"type": "integer"}})))

    b = rows_delim(BOOKS, ";")
    out.append(T("dt_book_catalog",
        "Semicolon-separated book list: science-fiction titles oldest first (title, year), books per author, "
        "and titles in upper case for the classics.",
        [step("parse", "csv_to_json", csv=BOOKS, delimiter=";", numeric=True),
         step("scifi", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "genre", "eq": "scifi"}, {"op": "sort", "key": "year"}, {"op": "pick", "fields": ["title", "year"]}]),
         step("authors", "json_transform", data=meta("parse"), ops=[{"op": "group_count", "field": "author"}]),
         step("classics", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "genre", "eq": "classic"}, {"op": "pick", "fields": ["title"]}, {"op": "map_field", "field": "title", "convert": "upper"}]),
         report(scifi_by_year="scifi", books_per_author="authors", classics="classics")],
        {"scifi_by_year": [{"title": r["title"], "year": r["year"]} for r in sorted([r for r in b if r["genre"] == "scifi"], key=lambda r: r["year"])],
         "books_per_author": {k: sum(1 for r in b if r["author"] == k) for k in {r["author"] for r in b}},
         "classics": [{"title": r["title"].upper()} for r in b if r["genre"] == "classic"]},
        obj_schema({"scifi_by_year": ARR, "books_per_author": OBJ, "classics": ARR})))

    sv = rows(SERVERS)
    out.append(T("dt_server_health",
        "Server inventory: unhealthy hosts (host, cpu_pct, busiest first), hosts per region, "
        "and the healthy hosts under 50% CPU.",
        [step("parse", "csv_to_json", csv=SERVERS, numeric=True),
         step("sick", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "healthy", "eq": "no"}, {"op": "sort", "key": "cpu_pct", "reverse": True}, {"op": "pick", "fields": ["host", "cpu_pct"]}]),
         step("regions", "json_transform", data=meta("parse"), ops=[{"op": "group_count", "field": "region"}]),
         step("idle", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "healthy", "eq": "yes"}, {"op": "filter", "field": "cpu_pct", "lt": 50}, {"op": "pick", "fields": ["host"]}]),
         report(unhealthy="sick", hosts_per_region="regions", spare_capacity="idle")],
        {"unhealthy": [{"host": r["host"], "cpu_pct": r["cpu_pct"]} for r in sorted([r for r in sv if r["healthy"] == "no"], key=lambda r: r["cpu_pct"], reverse=True)],
         "hosts_per_region": {k: sum(1 for r in sv if r["region"] == k) for k in {r["region"] for r in sv}},
         "spare_capacity": [{"host": r["host"]} for r in sv if r["healthy"] == "yes" and r["cpu_pct"] < 50]},
        obj_schema({"unhealthy": ARR, "hosts_per_region": OBJ, "spare_capacity": ARR})))

    o, c = rows(ORDERS), rows(CUSTOMERS)
    out.append(T("dt_order_ledger",
        "Orders and customers CSVs: orders per customer, total revenue, acme's orders largest first "
        "(order_id, total), and the gold-tier customers with their country.",
        [step("parse_orders", "csv_to_json", csv=ORDERS, numeric=True),
         step("parse_customers", "csv_to_json", csv=CUSTOMERS),
         step("per_customer", "json_transform", data=meta("parse_orders"), ops=[{"op": "group_count", "field": "customer"}]),
         step("revenue", "json_transform", data=meta("parse_orders"), ops=[{"op": "sum", "field": "total"}]),
         step("acme", "json_transform", data=meta("parse_orders"), ops=[{"op": "filter", "field": "customer", "eq": "acme"}, {"op": "sort", "key": "total", "reverse": True}, {"op": "pick", "fields": ["order_id", "total"]}]),
         step("gold", "json_transform", data=meta("parse_customers"), ops=[{"op": "filter", "field": "tier", "eq": "gold"}, {"op": "pick", "fields": ["customer", "country"]}]),
         report(orders_per_customer="per_customer", revenue="revenue", acme_orders="acme", gold_customers="gold")],
        {"orders_per_customer": {k: sum(1 for r in o if r["customer"] == k) for k in {r["customer"] for r in o}},
         "revenue": sum(r["total"] for r in o),
         "acme_orders": [{"order_id": r["order_id"], "total": r["total"]} for r in sorted([r for r in o if r["customer"] == "acme"], key=lambda r: r["total"], reverse=True)],
         "gold_customers": [{"customer": r["customer"], "country": r["country"]} for r in c if r["tier"] == "gold"]},
        obj_schema({"orders_per_customer": OBJ, "revenue": NUM, "acme_orders": ARR, "gold_customers": ARR})))

    out.append(T("dt_sales_to_csv",
        "Rebuild a CSV of the widget lines (region, units) sorted by units, most first, from the sales CSV, "
        "and report it with the widget unit total and the distinct products.",
        [step("parse", "csv_to_json", csv=SALES, numeric=True),
         step("widgets", "json_transform", data=meta("parse"), ops=[{"op": "filter", "field": "product", "eq": "widget"}, {"op": "sort", "key": "units", "reverse": True}, {"op": "pick", "fields": ["region", "units"]}]),
         step("widget_csv", "json_to_csv", data=meta("widgets"), columns=["region", "units"]),
         step("widget_units", "json_transform", data=meta("widgets"), ops=[{"op": "sum", "field": "units"}]),
         step("products", "json_transform", data=meta("parse"), ops=[{"op": "pick", "fields": ["product"]}, {"op": "unique"}, {"op": "sort", "key": "product"}]),
         step("report", "json_transform", data={"csv": "${widget_csv.output.text}", "widget_units": meta("widget_units"), "products": meta("products")}, ops=[])],
        _widget_expected(s),
        obj_schema({"csv": {"type": "string"}, "widget_units": NUM, "products": ARR})))
    return out


def rows_delim(text, delim):
    return [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(io.StringIO(text), delimiter=delim)]


def _widget_expected(s):
    w = sorted([r for r in s if r["product"] == "widget"], key=lambda r: r["units"], reverse=True)
    csv_text = "region,units\n" + "".join(f"{r['region']},{r['units']}\n" for r in w)
    products = sorted({r["product"] for r in s})
    return {"csv": csv_text, "widget_units": sum(r["units"] for r in w), "products": [{"product": p} for p in products]}
