"""Small BEIR-layout evaluation sets in English, Japanese and Russian, written for the tests.

The tests and the notebooks (under pytest) use them when RAG_EVAL_DATA is not set, so a clone
with nothing beside it passes. The sentences are real prose, each query shares words and meaning
with the documents judged relevant to it, and the other documents are about other things: a
working retriever gets most of them right and a broken one does not.

- mini-en: 30 short abstracts and 12 claims, one relevant abstract each (shaped like SciFact).
- mini-ja: 24 encyclopedia paragraphs and 12 questions with reference answers (shaped like JSQuAD).
- mini-ru: six pages of each of four construction codes; a code's name finds all its pages
  (shaped like ru_construction: more judged documents per query than a sample keeps).
"""

from __future__ import annotations

import json
from pathlib import Path

EN_DOCS = [
    ("Vitamin D supplementation and hip fractures in older adults",
     "Hip fractures are a major cause of disability in elderly people. In a randomised trial of 2,300 adults over "
     "seventy, daily vitamin D supplementation combined with calcium reduced the rate of hip fractures by a fifth "
     "over three years. The effect was largest in people with low vitamin D levels at baseline. Falls were also "
     "less frequent in the supplemented group, which may explain part of the benefit."),
    ("Statins, LDL cholesterol and cardiovascular events",
     "Statins inhibit HMG-CoA reductase, the enzyme that limits cholesterol synthesis in the liver. Across large "
     "trials, statin therapy lowered LDL cholesterol by about a third and reduced heart attacks and strokes in "
     "proportion to the fall in LDL. Muscle pain was reported by some patients, but serious side effects were rare."),
    ("Transmission of methicillin-resistant Staphylococcus aureus in hospitals",
     "Methicillin-resistant Staphylococcus aureus (MRSA) spreads between patients mostly on the hands of staff and "
     "on shared equipment. Genome sequencing of isolates from one surgical ward traced a cluster of infections to "
     "a single colonised patient. Screening new admissions and isolating carriers ended the outbreak."),
    ("Sleep deprivation impairs memory consolidation",
     "During sleep the hippocampus replays the activity patterns of the day, which helps move new memories into "
     "long-term storage. Volunteers kept awake for one night after learning word pairs recalled thirty percent "
     "fewer pairs two days later than volunteers who slept. Recovery sleep on the second night did not restore "
     "the lost memories."),
    ("Mediterranean diet and coronary heart disease",
     "A diet rich in olive oil, vegetables, legumes, fish and nuts was compared with a low-fat control diet in "
     "people at high cardiovascular risk. After five years the Mediterranean diet groups had fewer heart attacks, "
     "strokes and cardiovascular deaths. Body weight changed little in either group."),
    ("Ocean warming and mass coral bleaching",
     "Reef-building corals live in symbiosis with algae that supply most of their energy. When sea surface "
     "temperatures stay one or two degrees above the summer maximum for several weeks, the corals expel the "
     "algae and turn white. Repeated marine heatwaves have caused mass bleaching on the Great Barrier Reef, and "
     "many bleached corals died before they could recover."),
    ("Neonicotinoid pesticides and honeybee colonies",
     "Neonicotinoids are systemic insecticides that reach the pollen and nectar of treated crops. Field studies "
     "found that honeybee colonies foraging on treated oilseed rape produced fewer queens and lost more workers, "
     "because exposed bees had trouble navigating back to the hive. Wild bumblebees were affected as well."),
    ("Retreat of Alpine glaciers since 1850",
     "Glaciers in the Alps have lost about half of their volume since the end of the Little Ice Age. Melting "
     "accelerated after 1980 as summer air temperatures rose. Small glaciers below three thousand metres are "
     "expected to disappear within decades, which will change river flow in late summer."),
    ("Aspirin use and colorectal cancer",
     "Long-term follow-up of trials in which participants took low-dose aspirin daily showed a lower incidence "
     "of colorectal cancer after a delay of about ten years. The protective effect is thought to come from "
     "inhibition of the enzyme COX-2, which is active in many colon tumours. Bleeding risk limits its use for "
     "prevention."),
    ("Gut microbiota and obesity in mice",
     "Germ-free mice that received gut bacteria from obese donors gained more fat than mice that received "
     "bacteria from lean donors, although both ate the same food. The microbiota of obese donors extracted more "
     "energy from dietary fibre. Housing the two groups together let the lean microbiota colonise and prevented "
     "the weight gain."),
    ("Measles vaccination coverage and outbreaks",
     "Measles is one of the most contagious human diseases, and outbreaks start when vaccination coverage falls "
     "below about ninety-five percent. Analysis of recent European outbreaks showed that most cases occurred in "
     "unvaccinated children and young adults. Two doses of the vaccine protect about ninety-seven percent of "
     "people for life."),
    ("Off-target cutting by CRISPR-Cas9",
     "The Cas9 nuclease is guided to its target by a short RNA, but it tolerates some mismatches and can cut DNA "
     "at similar sequences elsewhere in the genome. Whole-genome sequencing of edited human cells found "
     "off-target mutations at a handful of sites. Engineered high-fidelity Cas9 variants reduced off-target "
     "cutting to undetectable levels."),
    ("Fine particulate air pollution and childhood asthma",
     "Children living near busy roads breathe more fine particulate matter (PM2.5) and nitrogen dioxide. A "
     "cohort study in eight cities found that each increase in PM2.5 exposure was associated with more asthma "
     "attacks and emergency visits. Lung growth was also slower in the most polluted neighbourhoods."),
    ("Aerobic exercise for depression",
     "Adults with mild to moderate depression were randomised to supervised aerobic exercise three times a week "
     "or to usual care. After twelve weeks, symptoms improved more in the exercise group, with effects similar "
     "to those of antidepressant medication. Benefits faded in participants who stopped exercising."),
    ("Lung function after smoking cessation",
     "Smokers lose lung function faster than non-smokers. In a study that followed people for eleven years, "
     "those who quit smoking saw a small improvement in the first year and afterwards lost lung function at "
     "the same slow rate as people who had never smoked."),
    ("Insecticide-treated bed nets and child mortality from malaria",
     "Malaria kills hundreds of thousands of young children in Africa every year. Trials in which villages "
     "received insecticide-treated bed nets showed a fall of about one fifth in child deaths from all causes. "
     "Nets also reduced the number of mosquitoes, which protected households without nets."),
    ("Telomere length and biological ageing",
     "Telomeres are repeated DNA sequences that protect the ends of chromosomes and shorten at each cell "
     "division. Shorter telomeres in white blood cells were associated with higher mortality in older adults. "
     "Chronic stress and smoking were linked to faster telomere shortening."),
    ("Metformin and insulin resistance in type 2 diabetes",
     "In type 2 diabetes the body responds poorly to insulin, and blood glucose rises. Metformin lowers glucose "
     "production in the liver and improves insulin sensitivity. In overweight patients it reduced "
     "diabetes-related deaths compared with diet alone, without causing weight gain."),
    ("Zika virus infection in pregnancy and microcephaly",
     "During the 2015 Zika epidemic in Brazil, the number of babies born with microcephaly rose sharply. The "
     "virus was found in the brain tissue of affected foetuses and in the amniotic fluid of their mothers. "
     "Infection in the first trimester carried the highest risk."),
    ("Coffee, caffeine and the risk of Parkinson's disease",
     "Several large cohort studies found that men who drank more coffee had a lower risk of developing "
     "Parkinson's disease. The association followed the dose of caffeine rather than other components of coffee, "
     "and caffeine protected dopamine neurons in animal models of the disease."),
    ("Microplastics in drinking water",
     "Samples of tap water and bottled water from many countries contained microplastic particles, mostly "
     "fragments and fibres smaller than one millimetre. Bottled water held more particles than tap water, some "
     "of them shed by the plastic caps. The health effects of swallowing these particles are not yet known."),
    ("Hand hygiene and hospital-acquired infections",
     "Infections acquired in hospital affect about one patient in twenty. A hospital-wide campaign that placed "
     "alcohol hand rub at every bed and gave staff feedback on their compliance doubled hand hygiene and cut "
     "hospital-acquired infections by forty percent over four years."),
    ("Stem cell therapy after myocardial infarction",
     "Bone marrow cells injected into the coronary arteries after a heart attack were expected to regenerate "
     "heart muscle. In a large randomised trial, the injected cells did not improve the pumping function of the "
     "left ventricle after six months compared with placebo."),
    ("Antidepressants in adolescents",
     "Selective serotonin reuptake inhibitors (SSRIs) are prescribed to adolescents with major depression. A "
     "pooled analysis of trials found modest benefits and a small increase in suicidal thoughts during the first "
     "weeks of treatment, which led regulators to require a warning and close monitoring."),
    ("Deep brain stimulation for Parkinson's tremor",
     "Electrodes implanted in the subthalamic nucleus deliver continuous electrical pulses. In patients with "
     "advanced Parkinson's disease, deep brain stimulation reduced tremor and stiffness and allowed lower doses "
     "of levodopa. Surgery carried a small risk of bleeding in the brain."),
    ("HPV vaccination and cervical cancer",
     "Human papillomavirus (HPV) causes almost all cases of cervical cancer. In Sweden, women who received the "
     "HPV vaccine before the age of seventeen had a risk of invasive cervical cancer nearly ninety percent lower "
     "than unvaccinated women."),
    ("Dietary salt and blood pressure",
     "In a feeding trial, adults ate diets with three levels of sodium for a month each. Blood pressure fell at "
     "each step down in salt intake, in people with and without hypertension. The effect was larger in older "
     "participants."),
    ("Rifampicin resistance in tuberculosis",
     "Tuberculosis that resists rifampicin, the most important first-line drug, needs long and toxic treatment. "
     "A molecular test that detects the rpoB mutations responsible for rifampicin resistance gives results in "
     "two hours instead of weeks, so patients start the right treatment sooner."),
    ("Amyloid plaques in Alzheimer's disease",
     "Alzheimer's disease is marked by plaques of amyloid-beta peptide and tangles of tau protein in the brain. "
     "Antibodies that remove amyloid plaques slowed cognitive decline modestly in early disease but caused brain "
     "swelling in some patients."),
    ("Noise exposure and hearing loss",
     "Long exposure to sounds louder than eighty-five decibels damages the hair cells of the inner ear, which do "
     "not grow back. Workers in noisy factories who did not wear hearing protection developed hearing loss at "
     "high frequencies earlier than protected workers."),
]

# (claim, index of the relevant abstract in EN_DOCS)
EN_QUERIES = [
    ("Vitamin D supplements reduce hip fractures in elderly people.", 0),
    ("Statin therapy lowers LDL cholesterol and the risk of heart attack.", 1),
    ("Neonicotinoid pesticides harm honeybee colonies.", 6),
    ("Warmer ocean temperatures cause coral bleaching.", 5),
    ("Sleep deprivation impairs the consolidation of memories.", 3),
    ("CRISPR-Cas9 can cut DNA at off-target sites.", 11),
    ("Fine particulate air pollution worsens asthma in children.", 12),
    ("Insecticide-treated bed nets reduce child deaths from malaria.", 15),
    ("Caffeine intake is associated with a lower risk of Parkinson's disease.", 19),
    ("HPV vaccination prevents cervical cancer.", 25),
    ("Reducing salt intake lowers blood pressure.", 26),
    ("Hand hygiene reduces infections acquired in hospital.", 21),
]

# (title, paragraph); questions below point at them by index
JA_DOCS = [
    ("富士山", "富士山は静岡県と山梨県にまたがる活火山で、標高3776メートルは日本の最高峰である。"
              "最後の噴火は1707年の宝永噴火で、2013年に世界文化遺産に登録された。"),
    ("梅雨", "梅雨は初夏に雨やくもりの日が続く時期で、沖縄では5月、本州では6月ごろに始まる。"
            "北海道でははっきりした梅雨が見られない。"),
    ("東京タワー", "東京タワーは港区芝公園にある電波塔で、1958年に完成した。高さは333メートルで、"
                 "赤と白に塗り分けられている。"),
    ("寿司", "寿司は酢で味をつけた飯に魚介類などを組み合わせた料理である。江戸時代の後期に、"
            "屋台で手早く食べられる握り寿司が広まった。"),
    ("新幹線", "新幹線は日本の高速鉄道で、1964年10月1日に東海道新幹線が東京と新大阪の間で開業した。"
              "最高速度は開業当時時速210キロメートルだった。"),
    ("桜", "桜はバラ科の落葉樹で、春に白や淡い紅色の花を咲かせる。代表的な品種のソメイヨシノは"
           "江戸時代の末に染井村で広まったとされる。"),
    ("将棋", "将棋は二人で行う盤上遊戯で、9かける9の盤と40枚の駒を使う。取った相手の駒を"
            "自分の駒として再び使えることがチェスとの大きな違いである。"),
    ("茶道", "茶道は客を招いて抹茶をたてて出す作法で、安土桃山時代に千利休がわび茶を大成した。"),
    ("京都", "京都は794年に平安京が置かれてから1000年以上にわたって日本の都であった。"
            "金閣寺や清水寺など多くの寺社がある。"),
    ("北海道", "北海道は日本の最北の地域で、面積は約8万3千平方キロメートルと都道府県で最も広い。"
              "道庁所在地は札幌市である。"),
    ("相撲", "相撲は土俵の上で二人の力士が組み合う競技で、相手を土俵の外に出すか、足の裏以外を"
            "地面につけさせれば勝ちとなる。最高位は横綱である。"),
    ("俳句", "俳句は五七五の十七音からなる短い詩で、季節を表す季語を入れるのが原則である。"
            "江戸時代の松尾芭蕉が芸術として高めた。"),
    ("地震", "日本は四つのプレートの境界に位置するため地震が多い。1923年の関東大震災では"
            "火災による被害が大きかった。"),
    ("温泉", "温泉は地中から湧き出す温かい水で、日本には3000か所以上の温泉地がある。"
            "大分県の別府は湧出量が特に多い。"),
    ("漢字", "漢字は中国で生まれた文字で、日本には5世紀ごろまでに伝わった。"
            "常用漢字表には2136字が定められている。"),
    ("歌舞伎", "歌舞伎は江戸時代に発展した演劇で、出雲の阿国が京都で踊ったかぶき踊りが始まりとされる。"
              "現在は男性の役者だけが演じる。"),
    ("沖縄", "沖縄県は日本の最南端にある県で、かつては琉球王国として独自の文化を育んだ。"
            "県庁所在地は那覇市である。"),
    ("琵琶湖", "琵琶湖は滋賀県にある日本最大の湖で、面積は約670平方キロメートルである。"
              "京阪神地域の水源として重要な役割を果たしている。"),
    ("鎌倉幕府", "鎌倉幕府は源頼朝が鎌倉に開いた武家政権で、1333年に滅亡した。"
                "執権の北条氏が実権を握った。"),
    ("柔道", "柔道は嘉納治五郎が1882年に講道館を開いて創始した武道で、1964年の東京オリンピックで"
            "正式種目になった。"),
    ("折り紙", "折り紙は一枚の紙を折って動物や花などの形を作る遊びで、代表的な作品に鶴がある。"),
    ("米", "米は日本の主食で、新潟県は生産量が最も多い県の一つである。田植えは春、稲刈りは秋に行われる。"),
    ("台風", "台風は北西太平洋で発達した熱帯低気圧のうち最大風速が毎秒17メートル以上のもので、"
            "夏から秋にかけて日本に接近する。"),
    ("明治維新", "明治維新は江戸幕府が倒れた後に進められた近代化の改革で、1871年の廃藩置県で"
                "藩が廃止され県が置かれた。"),
]

# (question, index of its paragraph in JA_DOCS, reference answers)
JA_QUERIES = [
    ("富士山の標高は何メートルか。", 0, ["3776メートル"]),
    ("東京タワーが完成したのは何年か。", 2, ["1958年"]),
    ("東海道新幹線が開業したのはいつか。", 4, ["1964年10月1日"]),
    ("わび茶を大成したのは誰か。", 7, ["千利休"]),
    ("平安京が置かれたのは何年か。", 8, ["794年"]),
    ("相撲の最高位は何か。", 10, ["横綱"]),
    ("俳句は何音からなる詩か。", 11, ["十七音", "五七五の十七音"]),
    ("常用漢字表には何字が定められているか。", 14, ["2136字"]),
    ("日本最大の湖はどこか。", 17, ["琵琶湖"]),
    ("鎌倉幕府を開いたのは誰か。", 18, ["源頼朝"]),
    ("柔道を創始したのは誰か。", 19, ["嘉納治五郎"]),
    ("廃藩置県が行われたのは何年か。", 23, ["1871年"]),
]

# code -> (name, twelve sentences); each page is the header and two sentences
RU_CODES = {
    "СП 901.1": ("Пожарная безопасность жилых зданий", [
        "Жилые здания оборудуются автоматической пожарной сигнализацией в общих коридорах.",
        "Каждая квартира выше пятого этажа должна иметь выход на лестничную клетку или балкон.",
        "Ширина эвакуационного выхода из квартиры принимается не менее восьмидесяти сантиметров.",
        "Двери лестничных клеток оснащаются устройствами для самозакрывания.",
        "В зданиях высотой более двадцати восьми метров предусматриваются незадымляемые лестничные клетки.",
        "Внутренний противопожарный водопровод проектируется в домах выше двенадцати этажей.",
        "Отделка стен на путях эвакуации выполняется из негорючих материалов.",
        "Подъезд пожарных машин обеспечивается с двух продольных сторон здания.",
        "Мусоропроводы размещаются в отдельных помещениях с противопожарными дверями.",
        "Кухни квартир оборудуются автономными дымовыми пожарными извещателями.",
        "Расстояние между жилыми домами определяется степенью огнестойкости зданий.",
        "Подвальные помещения отделяются от жилой части противопожарными перекрытиями.",
    ]),
    "СП 902.2": ("Тепловая защита ограждающих конструкций", [
        "Сопротивление теплопередаче наружных стен определяется по градусо-суткам отопительного периода.",
        "Окна и балконные двери должны иметь не менее двух слоёв остекления.",
        "Утеплитель наружных стен защищается от увлажнения пароизоляцией с тёплой стороны.",
        "Температура внутренней поверхности стены не должна опускаться ниже точки росы.",
        "Мостики холода в местах примыкания плит перекрытий устраняются дополнительным утеплением.",
        "Воздухопроницаемость ограждающих конструкций проверяется натурными испытаниями.",
        "Теплоизоляция чердачного перекрытия рассчитывается на ту же нагрузку, что и покрытие.",
        "Энергетический паспорт здания составляется на стадии проекта.",
        "Удельный расход тепловой энергии на отопление сравнивается с нормируемым значением.",
        "Для фасадных систем применяются негорючие минераловатные плиты.",
        "Влажностный режим помещений учитывается при выборе материала утеплителя.",
        "Теплотехнический расчёт выполняется для самой холодной пятидневки года.",
    ]),
    "СП 903.3": ("Проектирование автомобильных дорог", [
        "Категория автомобильной дороги устанавливается по расчётной интенсивности движения.",
        "Ширина полосы движения на дорогах первой категории принимается три целых семьдесят пять сотых метра.",
        "Продольный уклон дороги в горной местности не должен превышать шестидесяти промилле.",
        "Радиус кривых в плане выбирается по расчётной скорости движения.",
        "Обочины укрепляются щебнем или асфальтобетоном на ширину не менее полуметра.",
        "Водоотвод с проезжей части обеспечивается поперечным уклоном покрытия.",
        "Дорожная одежда рассчитывается на нагрузку от грузовых автомобилей.",
        "Пересечения дорог в одном уровне оборудуются островками безопасности.",
        "Вдоль дорог в населённых пунктах устраиваются тротуары и освещение.",
        "Земляное полотно возводится из грунтов, не теряющих прочности при намокании.",
        "Видимость поверхности дороги для остановки рассчитывается по скорости движения.",
        "Барьерные ограждения устанавливаются на насыпях высотой более трёх метров.",
    ]),
    "СП 904.4": ("Водоснабжение. Наружные сети и сооружения", [
        "Расчётный расход воды на хозяйственно-питьевые нужды принимается по числу жителей.",
        "Водопроводные сети проектируются кольцевыми для бесперебойной подачи воды.",
        "Глубина заложения труб принимается ниже глубины промерзания грунта.",
        "Пожарные гидранты размещаются вдоль дорог на расстоянии не более двух с половиной метров от края.",
        "Резервуары чистой воды разделяются не менее чем на два отделения.",
        "Зоны санитарной охраны устанавливаются вокруг водозаборных скважин.",
        "Насосные станции первого подъёма подают воду на очистные сооружения.",
        "Обеззараживание питьевой воды выполняется хлорированием или ультрафиолетом.",
        "Напор в сети на вводе в жилое здание составляет не менее десяти метров.",
        "Стальные трубы защищаются от коррозии наружной изоляцией.",
        "Колодцы на сети оборудуются запорной арматурой для отключения участков.",
        "Качество воды контролируется лабораторией на каждом этапе очистки.",
    ]),
}


def _write(folder: Path, corpus: list[dict], queries: list[dict], qrels: list[tuple[str, str]],
           answers: list[dict] | None = None) -> None:
    folder.mkdir(parents=True)

    def jsonl(name: str, rows: list[dict]) -> None:
        (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    jsonl("corpus.jsonl", corpus)
    jsonl("queries.jsonl", queries)
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels),
                                      encoding="utf-8")
    if answers is not None:
        jsonl("answers.jsonl", answers)


def write_eval_sets(root: Path) -> Path:
    """Write mini-en, mini-ja and mini-ru under `root` (a folder for RAG_EVAL_DATA) and return it."""
    _write(root / "mini-en",
           [{"_id": f"en{i}", "title": title, "text": text} for i, (title, text) in enumerate(EN_DOCS)],
           [{"_id": f"c{n}", "text": claim} for n, (claim, _) in enumerate(EN_QUERIES)],
           [(f"c{n}", f"en{doc}") for n, (_, doc) in enumerate(EN_QUERIES)])
    _write(root / "mini-ja",
           [{"_id": f"a{i}p0", "title": title, "text": text} for i, (title, text) in enumerate(JA_DOCS)],
           [{"_id": f"a{doc}p0q{n}", "text": question} for n, (question, doc, _) in enumerate(JA_QUERIES)],
           [(f"a{doc}p0q{n}", f"a{doc}p0") for n, (_, doc, _) in enumerate(JA_QUERIES)],
           [{"_id": f"a{doc}p0q{n}", "answers": refs} for n, (_, doc, refs) in enumerate(JA_QUERIES)])
    corpus, queries, qrels = [], [], []
    for n, (code, (name, sentences)) in enumerate(RU_CODES.items()):
        queries.append({"_id": f"r{n}", "text": name})
        for page in range(len(sentences) // 2):
            doc_id = f"{code}#p{page + 1}"
            text = f"{code} {name}. Страница {page + 1}. " + " ".join(sentences[2 * page: 2 * page + 2])
            corpus.append({"_id": doc_id, "title": code, "text": text})
            qrels.append((f"r{n}", doc_id))
    _write(root / "mini-ru", corpus, queries, qrels)
    return root


def write_documents_folder(root: Path, judged: int = 8) -> Path:
    """A user's folder for notebook 00: the English abstracts as markdown files, plus a judgements.tsv
    (question<TAB>file) from the first `judged` claims' relevance judgements, as a user would write one."""
    folder = root / "my-documents"
    folder.mkdir(parents=True)
    for i, (title, text) in enumerate(EN_DOCS):
        (folder / f"en{i}.md").write_text(f"# {title}\n\n{text}\n", encoding="utf-8")
    lines = [f"{claim}\ten{doc}.md" for claim, doc in EN_QUERIES[:judged]]
    (folder / "judgements.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder
