"""A multi-turn chat set: short documents in English, Russian and Japanese, and conversations over them.

The documents are written here in the style of the evaluation sets (scientific abstracts, building
code clauses, encyclopedia paragraphs). Each conversation mixes real follow-ups (pronouns, "and...",
ellipsis) with switches to a new topic; every turn names the source that should be among the top
three sources of its answer. The tests and eval/bench_multiturn.py both ingest and ask it.
"""

from __future__ import annotations

DOCS: list[dict[str, str]] = [
    # English: abstracts in the style of SciFact.
    {"source": "en/vitamin-d.txt", "title": "Vitamin D supplementation and fractures in older adults",
     "text": "In a randomised trial of 2,256 community-dwelling women aged 70 years or older, a single annual "
             "oral dose of 500,000 IU of cholecalciferol did not reduce the rate of fractures. Women who "
             "received the high dose had 15% more falls than the placebo group, mostly in the first three "
             "months after dosing. Daily doses of 800 IU combined with calcium remain the usual recommendation."},
    {"source": "en/statins.txt", "title": "Statin therapy lowers LDL cholesterol",
     "text": "Statins inhibit HMG-CoA reductase, the rate-limiting enzyme of cholesterol synthesis in the "
             "liver. Across 26 trials, each 1 mmol/L reduction in LDL cholesterol reduced major vascular "
             "events such as heart attack and stroke by about one fifth. Muscle pain was reported by 5% of "
             "patients but was rarely confirmed in blinded comparisons."},
    {"source": "en/microbiome.txt", "title": "Gut microbiota of obese mice",
     "text": "Obese ob/ob mice carry fewer Bacteroidetes and proportionally more Firmicutes in the gut than "
             "their lean littermates. Transplanting the caecal microbiota of obese donors into germ-free "
             "recipients led to a greater increase in body fat within two weeks than transplants from lean "
             "donors. The obese microbiome harvests more energy from the diet."},
    {"source": "en/crispr.txt", "title": "Off-target mutations of CRISPR-Cas9",
     "text": "Whole-genome sequencing of edited human cell lines found off-target mutations at sites that "
             "differ from the guide RNA by up to five mismatches. The GUIDE-seq method detected such cleavage "
             "sites by capturing double-stranded oligonucleotides at the breaks. High-fidelity Cas9 variants "
             "reduced off-target cleavage to levels that could not be detected."},
    {"source": "en/malaria.txt", "title": "Artemisinin resistance in Plasmodium falciparum",
     "text": "Delayed clearance of Plasmodium falciparum after artemisinin treatment is associated with "
             "mutations in the propeller domain of the kelch13 gene. The C580Y mutation spread across western "
             "Cambodia, Thailand and Myanmar within a decade. Partner drugs such as piperaquine now fail more "
             "often in the same region."},
    {"source": "en/sleep.txt", "title": "Sleep deprivation impairs memory",
     "text": "One night without sleep reduced activity in the hippocampus while volunteers learned new "
             "pictures, and their recall two days later was 40% worse than after normal sleep. Slow-wave "
             "sleep after learning strengthens memory consolidation by replaying recent experience."},
    {"source": "en/aspirin.txt", "title": "Aspirin and colorectal cancer",
     "text": "Long-term follow-up of five randomised trials showed that daily aspirin at a dose of 75 mg or more "
             "reduced the 20-year incidence of colorectal cancer by about 24% and deaths from it by 35%. "
             "The protection appeared only after five years of treatment, and bleeding was the main harm."},
    {"source": "en/bcg.txt", "title": "BCG vaccination and tuberculosis in children",
     "text": "A meta-analysis of 14 studies found that BCG vaccination of infants reduced tuberculous "
             "infection by 19% among children exposed at home and protected strongly against meningitis and "
             "miliary disease. The protection waned over the following 10 to 15 years."},
    {"source": "en/pm25.txt", "title": "Fine particulate air pollution and lung cancer",
     "text": "In a cohort of 312,944 people in nine European countries, the risk of lung adenocarcinoma rose "
             "by 18% for every 5 micrograms per cubic metre of PM2.5 in the air at home. The association was "
             "present even below the European Union's limit values and among people who had never smoked."},
    {"source": "en/telomeres.txt", "title": "Telomere length and ageing",
     "text": "Leukocyte telomeres shorten by about 25 base pairs per year in adults, and shorter telomeres "
             "were associated with higher mortality from heart disease. Smokers had telomeres equivalent to "
             "4.6 years of additional ageing, and obesity had an even larger effect."},
    {"source": "en/exercise.txt", "title": "Exercise training and insulin resistance",
     "text": "Sixteen weeks of combined aerobic and resistance training improved insulin sensitivity by 28% "
             "in adults with type 2 diabetes, measured with the hyperinsulinaemic clamp. Glycated "
             "haemoglobin fell by 0.6 percentage points, independent of weight loss."},
    {"source": "en/carbapenem.txt", "title": "Carbapenem-resistant Escherichia coli",
     "text": "The New Delhi metallo-beta-lactamase NDM-1 hydrolyses carbapenems and is carried on plasmids "
             "that spread between Escherichia coli and Klebsiella strains. Colistin remains active against most "
             "isolates, but resistance through the mcr-1 gene has been reported from pig farms."},
    # Russian: clauses in the style of building codes.
    {"source": "ru/evacuation.txt", "title": "Эвакуационные выходы",
     "text": "Ширина эвакуационного выхода в свету должна быть не менее 1,2 м при числе эвакуирующихся более "
             "50 человек. Высота эвакуационных выходов в свету должна быть не менее 1,9 м. Двери "
             "эвакуационных выходов должны открываться по направлению выхода из здания."},
    {"source": "ru/fire-resistance.txt", "title": "Огнестойкость несущих конструкций",
     "text": "Предел огнестойкости несущих стен и колонн зданий I степени огнестойкости должен быть не менее "
             "R 120. Для перекрытий таких зданий требуется предел REI 60. Огнезащитные покрытия металлических "
             "конструкций подтверждаются испытаниями."},
    {"source": "ru/stairs.txt", "title": "Незадымляемые лестничные клетки",
     "text": "В жилых зданиях высотой более 28 м следует предусматривать незадымляемые лестничные клетки типа "
             "Н2 или Н3. В лестничных клетках типа Н2 при пожаре обеспечивается подпор воздуха вентиляторами, "
             "создающими избыточное давление не менее 20 Па."},
    {"source": "ru/ventilation.txt", "title": "Вентиляция жилых помещений",
     "text": "Воздухообмен в жилых комнатах следует принимать не менее 3 кубических метров в час на 1 "
             "квадратный метр площади. Из кухни с электроплитой удаляется не менее 60 кубических метров "
             "воздуха в час, из ванной комнаты не менее 25."},
    {"source": "ru/thermal.txt", "title": "Теплозащита наружных стен",
     "text": "Приведённое сопротивление теплопередаче наружных стен определяется по градусо-суткам "
             "отопительного периода района строительства. Для Москвы требуемое значение составляет около "
             "3,1 квадратного метра на градус на ватт. Утеплитель защищают от увлажнения пароизоляцией."},
    {"source": "ru/roof.txt", "title": "Кровли",
     "text": "Уклон кровли из штучных материалов принимается не менее 12 градусов, из рулонных материалов — "
             "от 1,5 процента. Водосточные воронки на плоской кровле размещают не реже чем через 24 м."},
    {"source": "ru/foundations.txt", "title": "Глубина заложения фундаментов",
     "text": "Глубина заложения фундаментов на пучинистых грунтах должна быть не менее нормативной глубины "
             "сезонного промерзания грунта. На непучинистых песках глубина заложения не зависит от "
             "промерзания и назначается по конструктивным требованиям, но не менее 0,5 м."},
    {"source": "ru/alarm.txt", "title": "Пожарная сигнализация",
     "text": "Дымовые пожарные извещатели устанавливаются на потолке так, чтобы расстояние между ними не "
             "превышало 9 м, а до стены — 4,5 м. Ручные пожарные извещатели размещают на путях эвакуации на "
             "высоте 1,5 м от пола."},
    {"source": "ru/daylight.txt", "title": "Естественное освещение",
     "text": "Коэффициент естественной освещённости в жилых комнатах должен быть не менее 0,5 процента. На "
             "кухнях допускается то же значение, а в коридорах и ванных естественное освещение можно не "
             "предусматривать."},
    {"source": "ru/ramps.txt", "title": "Пандусы для маломобильных групп",
     "text": "Уклон пандуса на путях движения маломобильных групп населения не должен превышать 1:20. Ширина "
             "пандуса при одностороннем движении должна быть не менее 1,0 м, с поручнями с обеих сторон на "
             "высоте 0,9 м."},
    {"source": "ru/noise.txt", "title": "Звукоизоляция",
     "text": "Индекс изоляции воздушного шума межквартирными перекрытиями должен быть не менее 52 дБ. Индекс "
             "приведённого уровня ударного шума под перекрытием не должен превышать 60 дБ."},
    {"source": "ru/distances.txt", "title": "Противопожарные расстояния",
     "text": "Противопожарные расстояния между жилыми зданиями I и II степени огнестойкости принимаются не "
             "менее 6 м. Расстояние увеличивается до 15 м, если одно из зданий имеет V степень огнестойкости."},
    # Japanese: encyclopedia paragraphs in the style of JSQuAD.
    {"source": "ja/fuji.txt", "title": "富士山",
     "text": "富士山は静岡県と山梨県にまたがる活火山で、標高3776メートルは日本で最も高い。最後の噴火は1707年の"
             "宝永大噴火で、江戸にも火山灰が降った。2013年に世界文化遺産に登録された。"},
    {"source": "ja/tokyo-tower.txt", "title": "東京タワー",
     "text": "東京タワーは東京都港区芝公園にある総合電波塔で、1958年に完成した。高さは333メートルで、"
             "設計は内藤多仲が担当した。航空法に従って白と赤に塗り分けられている。"},
    {"source": "ja/shinkansen.txt", "title": "新幹線",
     "text": "東海道新幹線は1964年10月1日に東京駅と新大阪駅の間で開業した世界初の高速鉄道である。開業時の最高速度"
             "は時速210キロメートルで、所要時間は当初4時間だった。"},
    {"source": "ja/shogi.txt", "title": "将棋",
     "text": "将棋は二人で行うボードゲームで、9×9の盤と40枚の駒を使う。相手から取った駒を自分の駒として"
             "再び使える持ち駒の規則が、チェスとの大きな違いである。"},
    {"source": "ja/tea.txt", "title": "茶道",
     "text": "茶道は湯を沸かし茶を点てて客をもてなす日本の伝統文化である。安土桃山時代に千利休がわび茶を大成し、"
             "その流れは表千家、裏千家、武者小路千家の三千家に受け継がれている。"},
    {"source": "ja/sakura.txt", "title": "ソメイヨシノ",
     "text": "ソメイヨシノは江戸時代末期に染井村の植木職人が広めた桜の品種で、エドヒガンとオオシマザクラの"
             "雑種とされる。気象庁は東京の開花を靖国神社の標本木で観測している。"},
    {"source": "ja/biwa.txt", "title": "琵琶湖",
     "text": "琵琶湖は滋賀県にある日本最大の湖で、面積は約670平方キロメートルである。約400万年前に誕生した"
             "古代湖とされ、流れ出る川は瀬田川だけである。"},
    {"source": "ja/horyuji.txt", "title": "法隆寺",
     "text": "法隆寺は奈良県斑鳩町にある寺院で、聖徳太子が607年に創建したと伝えられる。西院伽藍は現存する"
             "世界最古の木造建築群であり、1993年に日本で初めて世界遺産に登録された。"},
    {"source": "ja/nobunaga.txt", "title": "織田信長",
     "text": "織田信長は尾張国出身の戦国大名で、1560年の桶狭間の戦いで今川義元を破った。1582年、家臣の"
             "明智光秀に襲われ、京都の本能寺で自害した。"},
    {"source": "ja/onsen.txt", "title": "草津温泉",
     "text": "草津温泉は群馬県吾妻郡草津町にある温泉で、自然湧出量は日本一とされる。強い酸性の湯のため、"
             "湯畑で湯の温度を下げる湯もみが行われてきた。"},
    {"source": "ja/sumo.txt", "title": "大相撲",
     "text": "大相撲の本場所は年に6回、両国国技館などで15日間ずつ開催される。最高位は横綱で、土俵の直径は"
             "4.55メートルと定められている。"},
]

# Each conversation is a list of (message, expected source) turns, asked in one session.
CONVERSATIONS: list[list[tuple[str, str]]] = [
    # English
    [("Does vitamin D supplementation reduce fractures in older women?", "en/vitamin-d.txt"),
     ("What dose was given?", "en/vitamin-d.txt"),
     ("Is aspirin linked to a lower risk of colorectal cancer?", "en/aspirin.txt")],
    [("How do statins lower LDL cholesterol?", "en/statins.txt"),
     ("And what does that do to heart attacks and strokes?", "en/statins.txt"),
     ("Which gene mutations cause artemisinin resistance in malaria parasites?", "en/malaria.txt")],
    [("What is associated with delayed parasite clearance after artemisinin treatment?", "en/malaria.txt"),
     ("Where did it spread?", "en/malaria.txt"),
     ("Does one night without sleep impair memory?", "en/sleep.txt")],
    [("How does the gut microbiota of obese mice differ from lean mice?", "en/microbiome.txt"),
     ("What happened after transplantation?", "en/microbiome.txt"),
     ("Why does that happen?", "en/microbiome.txt")],
    [("How common are off-target mutations with CRISPR-Cas9?", "en/crispr.txt"),
     ("How were they detected?", "en/crispr.txt"),
     ("Does BCG vaccination protect infants against tuberculosis?", "en/bcg.txt")],
    [("Does the BCG vaccine protect children exposed to tuberculosis at home?", "en/bcg.txt"),
     ("How long does the protection last?", "en/bcg.txt"),
     ("Is fine particulate air pollution linked to lung cancer?", "en/pm25.txt")],
    [("Does PM2.5 in the air raise the risk of lung adenocarcinoma?", "en/pm25.txt"),
     ("Even in people who never smoked?", "en/pm25.txt"),
     ("How fast do telomeres shorten with age?", "en/telomeres.txt")],
    [("Are shorter leukocyte telomeres associated with mortality?", "en/telomeres.txt"),
     ("What about smokers?", "en/telomeres.txt"),
     ("Does exercise training improve insulin sensitivity in type 2 diabetes?", "en/exercise.txt")],
    [("Can combined aerobic and resistance training reduce insulin resistance?", "en/exercise.txt"),
     ("By how much did it fall?", "en/exercise.txt"),
     ("Which enzyme makes Escherichia coli resistant to carbapenems?", "en/carbapenem.txt")],
    [("Which enzyme hydrolyses carbapenems in E. coli?", "en/carbapenem.txt"),
     ("What still works against them?", "en/carbapenem.txt"),
     ("Did the high annual dose of cholecalciferol increase falls?", "en/vitamin-d.txt")],
    [("How does sleep deprivation affect the hippocampus?", "en/sleep.txt"),
     ("And how much worse was it two days later?", "en/sleep.txt"),
     ("How long must aspirin be taken before it prevents colorectal cancer?", "en/aspirin.txt"),
     ("What is its main harm?", "en/aspirin.txt")],
    # A long, specific question, then a short one on a new topic, then its follow-up.
    [("Does a single annual high dose of cholecalciferol reduce fractures in women aged 70 or older?",
      "en/vitamin-d.txt"),
     ("Does aspirin prevent cancer?", "en/aspirin.txt"),
     ("At what dose?", "en/aspirin.txt")],
    [("Which mutations in the kelch13 propeller domain delay parasite clearance after artemisinin?",
      "en/malaria.txt"),
     ("What about statins?", "en/statins.txt"),
     ("Do they cause muscle pain?", "en/statins.txt")],
    # Russian
    [("Какой должна быть ширина эвакуационного выхода?", "ru/evacuation.txt"),
     ("А высота?", "ru/evacuation.txt"),
     ("Какой предел огнестойкости нужен для несущих стен?", "ru/fire-resistance.txt")],
    [("Где нужны незадымляемые лестничные клетки?", "ru/stairs.txt"),
     ("А как туда подаётся воздух?", "ru/stairs.txt"),
     ("Какой воздухообмен нужен в жилых комнатах?", "ru/ventilation.txt")],
    [("Какая глубина заложения фундаментов на пучинистых грунтах?", "ru/foundations.txt"),
     ("А на непучинистых песках?", "ru/foundations.txt"),
     ("Какой минимальный уклон кровли из штучных материалов?", "ru/roof.txt")],
    [("Как определяется сопротивление теплопередаче наружных стен?", "ru/thermal.txt"),
     ("Какое значение требуется для Москвы?", "ru/thermal.txt"),
     ("На каком расстоянии друг от друга ставят дымовые пожарные извещатели?", "ru/alarm.txt")],
    [("Какой наибольший уклон пандуса для маломобильных групп населения?", "ru/ramps.txt"),
     ("А какой должна быть его ширина?", "ru/ramps.txt"),
     ("Какой индекс изоляции воздушного шума у межквартирных перекрытий?", "ru/noise.txt")],
    [("Какие противопожарные расстояния между жилыми зданиями?", "ru/distances.txt"),
     ("А если одно из них V степени?", "ru/distances.txt"),
     ("Какой коэффициент естественной освещённости нужен в жилых комнатах?", "ru/daylight.txt")],
    [("Какой коэффициент естественной освещённости требуется в жилой комнате?", "ru/daylight.txt"),
     ("А на кухне?", "ru/daylight.txt"),
     ("Сколько воздуха удаляется из кухни с электроплитой?", "ru/ventilation.txt")],
    [("Какой предел огнестойкости у несущих стен зданий I степени?", "ru/fire-resistance.txt"),
     ("А для перекрытий?", "ru/fire-resistance.txt"),
     ("В какую сторону открываются двери эвакуационных выходов?", "ru/evacuation.txt")],
    [("На какой высоте размещают ручные пожарные извещатели?", "ru/alarm.txt"),
     ("А где именно их ставят?", "ru/alarm.txt"),
     ("Через сколько метров размещают водосточные воронки на плоской кровле?", "ru/roof.txt")],
    [("Какой уровень ударного шума допускается под перекрытием?", "ru/noise.txt"),
     ("А воздушного?", "ru/noise.txt"),
     ("С какой высоты зданий нужны незадымляемые лестничные клетки?", "ru/stairs.txt")],
    [("Какой ширины должен быть эвакуационный выход при числе эвакуирующихся более 50 человек?",
      "ru/evacuation.txt"),
     ("Что с уклоном кровли?", "ru/roof.txt"),
     ("А водосточные воронки?", "ru/roof.txt")],
    # Japanese
    [("富士山の標高は何メートルですか？", "ja/fuji.txt"),
     ("最後に噴火したのはいつですか？", "ja/fuji.txt"),
     ("東京タワーは何年に完成しましたか？", "ja/tokyo-tower.txt")],
    [("東京タワーの高さはどれくらいですか？", "ja/tokyo-tower.txt"),
     ("設計したのは誰ですか？", "ja/tokyo-tower.txt"),
     ("東海道新幹線はいつ開業しましたか？", "ja/shinkansen.txt")],
    [("東海道新幹線の開業時の最高速度は？", "ja/shinkansen.txt"),
     ("所要時間はどれくらいでしたか？", "ja/shinkansen.txt"),
     ("将棋の盤の大きさは？", "ja/shogi.txt")],
    [("将棋で使う駒は何枚ですか？", "ja/shogi.txt"),
     ("他のゲームとの違いは？", "ja/shogi.txt"),
     ("わび茶を大成したのは誰ですか？", "ja/tea.txt")],
    [("茶道の三千家とは何ですか？", "ja/tea.txt"),
     ("それを大成したのはいつの時代ですか？", "ja/tea.txt"),
     ("ソメイヨシノはどの品種の雑種ですか？", "ja/sakura.txt")],
    [("ソメイヨシノを広めたのは誰ですか？", "ja/sakura.txt"),
     ("どこで観測されますか？", "ja/sakura.txt"),
     ("琵琶湖の面積はどれくらいですか？", "ja/biwa.txt")],
    [("日本最大の湖はどこにありますか？", "ja/biwa.txt"),
     ("そこから流れ出る川は？", "ja/biwa.txt"),
     ("法隆寺を創建したのは誰ですか？", "ja/horyuji.txt")],
    [("法隆寺はいつ世界遺産に登録されましたか？", "ja/horyuji.txt"),
     ("どこにありますか？", "ja/horyuji.txt"),
     ("桶狭間の戦いで織田信長が破ったのは誰ですか？", "ja/nobunaga.txt")],
    [("織田信長はどこで自害しましたか？", "ja/nobunaga.txt"),
     ("彼を襲ったのは誰ですか？", "ja/nobunaga.txt"),
     ("自然湧出量が日本一の温泉はどこですか？", "ja/onsen.txt")],
    [("草津温泉はどこにありますか？", "ja/onsen.txt"),
     ("お湯の特徴は？", "ja/onsen.txt"),
     ("大相撲の本場所は年に何回ありますか？", "ja/sumo.txt")],
    [("大相撲の最高位は何ですか？", "ja/sumo.txt"),
     ("直径は？", "ja/sumo.txt"),
     ("富士山が世界文化遺産に登録されたのはいつですか？", "ja/fuji.txt")],
    [("織田信長が桶狭間の戦いで破った相手は誰ですか？", "ja/nobunaga.txt"),
     ("琵琶湖は？", "ja/biwa.txt"),
     ("面積は？", "ja/biwa.txt")],
]


def language_of(source: str) -> str:
    """The conversation language of a source: its folder (en, ru, ja)."""
    return source.split("/", 1)[0]


def ask_conversations(wb, site_id: str, *, k: int = 5, top: int = 3) -> list[dict]:
    """Ask every conversation in its own session; one record per turn: was the expected source in the top `top`,
    and does the answer's first citation point to it (`answered`; False when it says it has no answer)."""
    import re
    import time
    import uuid

    from rag_core.chat.prompts import labels
    from rag_core.bench.answers import cited_faithfulness

    no_answer = [labels(language)["no_context"] for language in ("en", "ru", "ja")]
    records = []
    for c, conversation in enumerate(CONVERSATIONS):
        session = f"mt-{uuid.uuid4().hex[:12]}"
        try:
            for t, (message, expected) in enumerate(conversation):
                started = time.perf_counter()
                turn = wb.chat(message, session_id=session, k=k, site_id=site_id)
                seconds = time.perf_counter() - started
                paths = [s.source for s in turn.sources[:top]]
                first_cited = re.search(r"\[(\d+)\]", turn.answer)
                cited = [s.source for s in turn.sources if first_cited and s.n == int(first_cited.group(1))]
                records.append({"conversation": c, "turn": t, "language": language_of(expected),
                                "switch": t > 0 and conversation[t - 1][1] != expected,
                                "message": message, "expected": expected, "hit": expected in paths,
                                "first": paths[:1] == [expected],
                                "answered": cited == [expected] and not any(n in turn.answer for n in no_answer),
                                "sources": paths, "retrieval_query": turn.retrieval_query, "answer": turn.answer,
                                "seconds": seconds,
                                "faithfulness": cited_faithfulness(turn.answer, {s.n: s.text for s in turn.sources})})
        finally:
            wb.chat_reset(session)
    return records


def hit_rates(records: list[dict], key: str = "hit") -> dict[str, float]:
    """Share of turns whose expected source was in the top three (`key="first"`: first), per language and overall."""
    rates = {}
    for lang in ("en", "ru", "ja", "all"):
        mine = [r[key] for r in records if lang in ("all", r["language"])]
        rates[lang] = sum(mine) / len(mine) if mine else 0.0
    return rates
