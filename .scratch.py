import re, tempfile, pathlib
from accelbench.store import Store
from tests.support.api_app import api_for
d=tempfile.mkdtemp()
DATA=pathlib.Path("tests/data")
with api_for(Store(f"sqlite:///{d}/x.db")) as a:
    r=a.client.get("/import?tool=nope", headers={"accept":"text/html"})
    print(r.status_code, re.findall(r'<span class="field-error"[^>]*>[^<]*</span>', r.text), re.findall(r'<option value="[^"]*"', r.text))
    f=DATA/"guidellm"/"benchmarks.json"
    res=a.client.post("/api/v1/imports/guidellm", files=[("files",(f.name,f.read_bytes(),"application/json"))], data={"label":"g"}, headers=a.auth)
    print(res.status_code, res.json())
    r=a.client.get(f"/runs/{res.json()['run_id']}", headers={"accept":"text/html"})
    m=re.search(r'<section class="card" id="imported".*?</section>', r.text, re.S); print(m.group(0) if m else r.text[:500])
