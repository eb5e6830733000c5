"""The sentences of the MiniLM reference test (imported by minilm_reference.py).

About 100 written ones in many languages, lengths and scripts, then combinations of them
(pairs, triples, a paragraph longer than the model's 256 tokens, case and spacing variants)
made deterministically, for 220 in all.
"""

BASE = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "How do I reset my password?",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "The quick brown fox jumps over the lazy dog.",
    "Hello!",
    "ok",
    "a",
    "",
    "   ",
    "Relax is TVM's next-generation graph-level intermediate representation.",
    "The virtual machine executes bytecode instructions one register at a time.",
    "Sentence embeddings map text to dense vectors for semantic search.",
    "I can't believe it's already November — where did the year go?!",
    "E = mc^2, and 2 + 2 = 4; 3.14159 is roughly pi.",
    "Call me at +1 (555) 010-9999 or e-mail jane.doe@example.com.",
    "https://github.com/apache/tvm/blob/main/python/tvm/relax/vm.py#L42",
    "def add(a, b):\n    return a + b",
    "for (let i = 0; i < n; i++) { sum += x[i] * y[i]; }",
    "SELECT name, COUNT(*) FROM users GROUP BY name HAVING COUNT(*) > 1;",
    "The mitochondria is the powerhouse of the cell.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Ich möchte ein Glas Wasser, bitte.",
    "Straße, Größe, Übermäßig, Äpfel und Öl.",
    "Le renard brun rapide saute par-dessus le chien paresseux.",
    "Où est la bibliothèque ? C'est à côté de l'hôpital.",
    "El rápido zorro marrón salta sobre el perro perezoso.",
    "¿Dónde está el baño? ¡Muchas gracias, señor!",
    "A raposa marrom rápida pula sobre o cão preguiçoso.",
    "La volpe marrone veloce salta sopra il cane pigro.",
    "De snelle bruine vos springt over de luie hond.",
    "Den snabba bruna räven hoppar över den lata hunden.",
    "Szybki brązowy lis przeskakuje nad leniwym psem.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Árvíztűrő tükörfúrógép.",
    "Hızlı kahverengi tilki tembel köpeğin üzerinden atlar.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Швидка бура лисиця стрибає через ледачого пса.",
    "Η γρήγορη καφέ αλεπού πηδά πάνω από το τεμπέλικο σκυλί.",
    "ΟΔΥΣΣΕΥΣ ΚΑΙ ΠΗΝΕΛΟΠΗ",
    "השועל החום המהיר קופץ מעל הכלב העצלן.",
    "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "مرحبا بالعالم! كيف حالك اليوم؟",
    "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।",
    "দ্রুত বাদামী শিয়াল অলস কুকুরের উপর দিয়ে লাফ দেয়।",
    "விரைவான பழுப்பு நரி சோம்பேறி நாயின் மேல் குதிக்கிறது.",
    "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "Con cáo nâu nhanh nhẹn nhảy qua con chó lười.",
    "Rubah cokelat yang cepat melompati anjing yang malas.",
    "敏捷的棕色狐狸跳过了懒狗。",
    "我爱自然语言处理，也喜欢机器学习。",
    "今天天气很好，我们去公园散步吧！",
    "素早い茶色の狐が怠け者の犬を飛び越える。",
    "東京は日本の首都です。カタカナとひらがなも使います。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘는다.",
    "안녕하세요, 만나서 반갑습니다.",
    "Ṫḧë q̈üïċḳ ḅṛöẅṅ ḟöẍ",
    "naïve café résumé coöperate façade jalapeño",
    "I ❤️ NY 🗽 and pizza 🍕🍕🍕!",
    "👍👍👍",
    "¯\\_(ツ)_/¯",
    "«Guillemets» and “curly quotes” and ‘single ones’ … and – dashes —",
    "tab\tseparated\tvalues\nand a new line\r\nand a carriage return",
    "zero\u200bwidth\u200dspace and soft\u00adhyphen",
    "control\u0007character and nul\u0000byte and replacement\ufffdchar",
    "[CLS] special tokens [SEP] inside the text [MASK] [PAD] [UNK]",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 120,
    "ThisIsAVeryLongCamelCaseIdentifierThatWordPieceWillSplitIntoManyPieces",
    "snake_case_identifier_with_many_parts_and_numbers_123_456",
    "1234567890 0987654321 3.14 2.71828 1e-12 0x1F",
    "Dr. Smith's lab (room 4B) opened at 9:30 a.m. on Jan. 5th, 2024.",
    "U.S.A., U.K., e.g., i.e., etc., vs.",
    "What's up?! Nothing much... just chillin' :)",
    "THE RAIN IN SPAIN STAYS MAINLY IN THE PLAIN.",
    "the rain in spain stays mainly in the plain.",
    "Machine learning models are trained on data.",
    "Deep neural networks learn hierarchical representations.",
    "The stock market fell sharply on Monday amid fears of a recession.",
    "Central banks raised interest rates to fight inflation.",
    "The team won the championship after a dramatic overtime victory.",
    "She scored two goals in the second half.",
    "Bake the cake at 180 degrees for 35 minutes.",
    "Add a pinch of salt and stir until the sugar dissolves.",
    "The patient was prescribed antibiotics for the infection.",
    "Regular exercise reduces the risk of heart disease.",
    "The spacecraft entered orbit around Mars after a seven-month journey.",
    "Black holes bend light with their immense gravity.",
    "Shakespeare wrote Hamlet around the year 1600.",
    "To be, or not to be, that is the question.",
    "Please turn off your phone during the movie.",
    "My flight was delayed by three hours because of the storm.",
]


def sentences():
    out = list(BASE)
    n = len(BASE)
    prose = [s for s in BASE if len(s) > 25]
    # Pairs and triples of sentences: longer inputs, mixed languages.
    for i in range(60):
        out.append(prose[i % len(prose)] + " " + prose[(7 * i + 3) % len(prose)])
    for i in range(36):
        a, b, c = (prose[(5 * i + k * 11) % len(prose)] for k in range(3))
        out.append(" ".join([a, b, c]))
    # Case and spacing variants of the same text.
    for i in range(0, 30, 3):
        out.append(BASE[i].upper())
        out.append("  " + BASE[i + 1].replace(" ", "   ") + "  ")
    # Two paragraphs longer than 256 tokens: truncation.
    out.append(" ".join(prose[:40]))
    out.append(" ".join(reversed(prose[10:60])))
    assert len(out) >= 200, len(out)
    return out
