"""The eight conversations: who the user is and which storylines they live.

A parameter "@N" is the date of that thread's stage N session ("@3+14": two
weeks later; "@2:month": its month name), so plans in the text agree with
when things happen.
"""

PERSONAS = [
    {
        "kb": "maya",
        "pools": {"conferences": [
            {"name": "the Design Systems Forum", "short": "design systems",
             "topic": "accessible colour palettes"},
            {"name": "Brand New Conference", "short": "Brand New",
             "topic": "logo redesigns"},
        ]},
        "name": "Maya", "gender": "f", "style": "dialogue", "cur": "£",
        "start": "2023-02-06", "months": 14, "sessions": 38,
        "home": "Leeds", "employer": "Brightside Print", "partner": "Jonas",
        "friends": ["Priti", "Callum", "Hannah", "Dev"],
        "threads": {
            "move": {"from_city": "Leeds", "to_city": "Bristol",
                     "reason": "Jonas got a permanent contract at the hospital there, and "
                               "{U} can design from anywhere",
                     "from_spot": "the Sunday market by the canal", "nb1": "Bedminster",
                     "nb2": "Easton", "feature": "a balcony big enough for two chairs",
                     "move_date": "@3", "mover": "Jonas", "broken": "the big mirror",
                     "cafe": "Pinkman's Corner", "neighbour": "Mr Adebayo"},
            "job": {"old_job": "Brightside Print", "old_boss": "Graham",
                    "merge_team": "the marketing team", "new_job": "Fernhill Studio",
                    "new_role": "senior designer", "interview_topic": "branding for "
                    "charities", "task": "a rebrand for a fictional bakery",
                    "new_boss": "Ines", "perk": "a four-day week in summer",
                    "start_date": "@4-3"},
            "race": {"race": "the Bristol Half", "race_date": "@5", "goal1": "two hours",
                     "friend": "Priti", "run1": "10 km", "run2": "18 km",
                     "injury": "shin splints in the left leg", "physio": "Rosa",
                     "run3": "8 km", "goal2": "2 hours 15", "finish": "2:11:42"},
            "wedding": {"sibling": "Adaeze", "sibling_rel": "sister", "fiance": "Tom",
                        "venue1": "the boathouse in Ilkley", "venue2": "Harewood village "
                        "hall", "wedding_date": "@3", "role": "maid of honour",
                        "speech_story": "the time Adaeze drove to the wrong Newcastle",
                        "friend": "Hannah", "wedding_moment": "The dog carried the rings "
                        "down the aisle and then refused to give them up"},
        },
        "habits": {"climbing": {"place": "The Depot", "buddy": "Callum"}},
    },
    {
        "kb": "tomasz",
        "pools": {"conferences": [
            {"name": "PyCon", "short": "PyCon",
             "topic": "testing legacy code"},
            {"name": "DevDays Kraków", "short": "DevDays",
             "topic": "offline maps"},
        ]},
        "name": "Tomasz", "gender": "m", "style": "notes", "cur": "zł",
        "start": "2023-09-04", "months": 10, "sessions": 30,
        "home": "Kraków", "employer": "Vistula Software", "partner": "Kasia",
        "friends": ["Piotr", "Marek", "Ola", "Bartek"],
        "threads": {
            "project": {"project": "Spoke", "project_what": "an app that plans cycling "
                        "routes avoiding tram tracks", "friend": "Piotr",
                        "help": "the map data", "hard_part": "getting the routing to avoid "
                        "cobbles", "liked": "the night mode", "confusing": "the elevation "
                        "chart", "setback": "The free map service changed its licence and "
                        "{u} would have to pay per request",
                        "milestone": "Spoke is in the app store and has 300 users"},
            "language": {"lang": "Spanish", "lang_tag": "spanish", "tutor": "Lucía",
                         "level": "B1", "exam1": "@3+7", "exam2": "@4-3",
                         "clash": "Kasia's sister's christening"},
            "reno": {"room": "kitchen", "builder1": "Nowak & Sons", "builder2": "Remont-Bud",
                     "colour1": "sage green cabinets", "colour2": "deep navy cabinets",
                     "delay": "the worktop arrived cut to the wrong size",
                     "feature2": "big window over the sink"},
            "health": {"symptom": "constant tiredness and headaches",
                       "diagnosis": "an underactive thyroid", "med1": "levothyroxine at "
                       "a low dose", "side_effect": "palpitations", "med2": "a lower "
                       "dose taken at night"},
        },
        "habits": {"football": {"buddy": "Bartek"}},
    },
    {
        "kb": "priya",
        "pools": {"conferences": [
            {"name": "the Royal Statistical Society meeting", "short": "statistics",
             "topic": "mixed models"},
            {"name": "DataConf", "short": "DataConf",
             "topic": "cleaning messy survey data"},
        ]},
        "name": "Priya", "gender": "f", "style": "dialogue", "cur": "£",
        "start": "2022-11-14", "months": 16, "sessions": 42,
        "home": "Manchester", "employer": "the university", "partner": None,
        "friends": ["Aoife", "Kwame", "Sophie", "Imran"],
        "threads": {
            "project": {"project": "Lab Notes", "project_what": "a podcast where PhD "
                        "students explain their research to their grandparents",
                        "friend": "Kwame", "help": "the sound editing",
                        "hard_part": "getting rid of the echo in the flat",
                        "liked": "the grandparents' questions", "confusing": "why each "
                        "episode had a different intro", "setback": "Kwame moved to "
                        "Leeds and the recording schedule fell apart",
                        "milestone": "episode ten went out and someone from the BBC "
                        "emailed"},
            "pet": {"animal": "dog", "pet": "Biscuit", "pet_trait": "one floppy ear and a "
                    "terror of bin bags", "vet_issue": "Biscuit ate a sock",
                    "pet_news": "Biscuit graduated from puppy class, second from bottom"},
            "trip_plan": {"companion": "Aoife", "dest1": "Crete", "dest2": "Sicily",
                          "trip_month": "@2:month", "lodging": "a small B&B run by an "
                          "elderly couple", "best_day": "the boat trip to the caves",
                          "worst_day": "the sunburn after falling asleep on the beach"},
            "job": {"old_job": "the university", "old_boss": "Professor Hale",
                    "merge_team": "the bioinformatics group", "new_job": "Halden Analytics",
                    "new_role": "data scientist", "interview_topic": "{my} thesis "
                    "statistics", "task": "predicting delivery delays",
                    "new_boss": "Marcus", "perk": "a budget for conferences",
                    "start_date": "@4-3"},
        },
        "habits": {"choir": {"buddy": "Eleanor", "piece": "Fauré's Requiem"}},
    },
    {
        "kb": "daniel",
        "pools": {"conferences": [
            {"name": "the regional nursing summit", "short": "nursing",
             "topic": "night-shift handovers"},
            {"name": "the Scottish Emergency Care conference", "short": "emergency care",
             "topic": "triage under pressure"},
        ]},
        "name": "Daniel", "gender": "m", "style": "notes", "cur": "£",
        "start": "2024-01-08", "months": 8, "sessions": 27,
        "home": "Glasgow", "employer": "the Royal Infirmary", "partner": "Ewan",
        "friends": ["Fiona", "Rab", "Shona", "Gav"],
        "threads": {
            "race": {"race": "the Loch Ness Marathon", "race_date": "@5",
                     "goal1": "four hours", "friend": "Fiona", "run1": "16 km",
                     "run2": "30 km", "injury": "a strained calf", "physio": "Kirsty",
                     "run3": "12 km", "goal2": "four and a half hours",
                     "finish": "4:22:10"},
            "health": {"symptom": "a rash that keeps coming back on {my} hands",
                       "diagnosis": "contact dermatitis from the hand gel at work",
                       "med1": "a steroid cream", "side_effect": "thinning skin",
                       "med2": "a barrier cream and cotton glove liners"},
            "wedding": {"sibling": "Callum", "sibling_rel": "brother", "fiance": "Mhairi",
                        "venue1": "a distillery on Islay", "venue2": "the Kelvingrove "
                        "bandstand", "wedding_date": "@3", "role": "best man",
                        "speech_story": "Callum's disastrous first driving lesson",
                        "friend": "Rab", "wedding_moment": "A piper turned up who nobody "
                        "had booked"},
            "trip_plan": {"companion": "Ewan", "dest1": "Iceland", "dest2": "the Faroe "
                          "Islands", "trip_month": "@2:month", "lodging": "a turf-roofed "
                          "cottage", "best_day": "the puffins on Mykines",
                          "worst_day": "the ferry in a storm"},
        },
        "habits": {"swimming": {"place": "the Western Baths", "buddy": "Shona"}},
    },
    {
        "kb": "lena",
        "pools": {"conferences": [
            {"name": "the Bakery Trade Fair", "short": "trade fair",
             "topic": "sourdough at scale"},
            {"name": "Slow Food Hamburg", "short": "Slow Food",
             "topic": "heritage grains"},
        ]},
        "name": "Lena", "gender": "f", "style": "dialogue", "cur": "€",
        "start": "2023-04-03", "months": 12, "sessions": 35,
        "home": "Hamburg", "employer": "the bakery", "partner": "Jannik",
        "friends": ["Mette", "Yusuf", "Clara", "Finn"],
        "threads": {
            "project": {"project": "Crumb Letter", "project_what": "a monthly newsletter "
                        "with one bread recipe and one story from the bakery",
                        "friend": "Clara", "help": "the illustrations",
                        "hard_part": "writing recipes that work in a home oven",
                        "liked": "the stories about regular customers",
                        "confusing": "the grams-to-cups table", "setback": "The mailing "
                        "service flagged it as spam after a subscriber complained",
                        "milestone": "Crumb Letter reached a thousand subscribers"},
            "reno": {"room": "bakery kitchen", "builder1": "Kraus Haustechnik",
                     "builder2": "Elbe Bau", "colour1": "white tiles", "colour2": "terracotta "
                     "tiles", "delay": "the new oven was stuck at the port for weeks",
                     "feature2": "the deck oven with the stone floor"},
            "move": {"from_city": "Hamburg", "to_city": "Lübeck",
                     "reason": "Jannik's parents are getting older and the second bakery "
                               "could open there", "from_spot": "the fish market on Sunday "
                               "mornings", "nb1": "the old town island", "nb2": "St. "
                     "Gertrud", "feature": "a courtyard with a fig tree", "move_date": "@3",
                     "mover": "Yusuf", "broken": "a box of grandmother's plates",
                     "cafe": "Café Marzipan", "neighbour": "Frau Lindqvist"},
            "language": {"lang": "Danish", "lang_tag": "danish", "tutor": "Søren",
                         "level": "module 3", "exam1": "@3+7", "exam2": "@4-3",
                         "clash": "the Christmas market rush"},
        },
        "habits": {"allotment": {"buddy": "Herr Petersen"}},
    },
    {
        "kb": "samuel",
        "pools": {"conferences": [
            {"name": "EdTech Live", "short": "EdTech",
             "topic": "phones in classrooms"},
            {"name": "the Historical Association conference", "short": "history teaching",
             "topic": "teaching local history"},
        ]},
        "name": "Samuel", "gender": "m", "style": "notes", "cur": "£",
        "start": "2024-02-19", "months": 7, "sessions": 25,
        "home": "Cardiff", "employer": "Ely High School", "partner": "Nia",
        "friends": ["Gethin", "Bethan", "Owain", "Leah"],
        "threads": {
            "job": {"old_job": "Ely High School", "old_boss": "Mrs Pritchard",
                    "merge_team": "the humanities department", "new_job": "Whitchurch "
                    "Academy", "new_role": "head of history", "interview_topic": "how {u} "
                    "would handle a struggling department", "task": "a lesson on the "
                    "Chartists", "new_boss": "Mr Okoro", "perk": "one extra free period a "
                    "week", "start_date": "@4-3"},
            "pet": {"animal": "cat", "pet": "Pudding", "pet_trait": "three legs and very "
                    "strong opinions", "vet_issue": "Pudding had a tooth abscess",
                    "pet_news": "Pudding now uses the cat flap instead of yowling at the "
                    "door"},
            "reno": {"room": "bathroom", "builder1": "Taff Plumbing", "builder2": "Jones "
                     "Bathrooms", "colour1": "a green tiled wall", "colour2": "plain white "
                     "tiles with a dark floor", "delay": "the builder found rotten "
                     "floorboards under the bath", "feature2": "walk-in shower"},
            "trip_plan": {"companion": "Nia", "dest1": "Portugal", "dest2": "Brittany",
                          "trip_month": "@2:month", "lodging": "a converted farmhouse",
                          "best_day": "cycling to the lighthouse", "worst_day": "the "
                          "campsite showers"},
        },
        "habits": {"pub_quiz": {"place": "the Pen and Wig", "buddy": "Gethin",
                                "team": "Quiz Akabusi"}},
    },
    {
        "kb": "aiko",
        "pools": {"conferences": [
            {"name": "DataConf", "short": "DataConf",
             "topic": "dashboard design"},
            {"name": "Lisbon Data Days", "short": "data days",
             "topic": "forecasting with small data"},
        ]},
        "name": "Aiko", "gender": "f", "style": "dialogue", "cur": "€",
        "start": "2022-06-06", "months": 18, "sessions": 44,
        "home": "Amsterdam", "employer": "Brightwave Analytics", "partner": None,
        "friends": ["Noor", "Lars", "Femke", "Rui"],
        "threads": {
            "language": {"lang": "Portuguese", "lang_tag": "portuguese", "tutor": "Beatriz",
                         "level": "A2", "exam1": "@3+7", "exam2": "@4-3",
                         "clash": "a work trip to Tokyo"},
            "move": {"from_city": "Amsterdam", "to_city": "Lisbon",
                     "reason": "{My} job is fully remote now and {u} {has} always wanted to "
                               "live by the sea", "from_spot": "cycling along the Amstel",
                     "nb1": "Alfama", "nb2": "Arroios", "feature": "azulejo tiles in the "
                     "hallway", "move_date": "@3", "mover": "Rui", "broken": "the lamp "
                     "{u} bought in Kyoto", "cafe": "Fábrica Coffee", "neighbour": "Dona "
                     "Graça"},
            "project": {"project": "Tiny Rooms", "project_what": "an illustrated zine about "
                        "small apartments and the people in them", "friend": "Femke",
                        "help": "printing", "hard_part": "drawing furniture in perspective",
                        "liked": "the floor plans", "confusing": "the handwritten captions",
                        "setback": "The risograph printer broke and the repair is weeks "
                        "away", "milestone": "the first print run of 200 copies sold out "
                        "at a zine fair"},
            "health": {"symptom": "migraines two or three times a week",
                       "diagnosis": "migraines linked to poor sleep and screen time",
                       "med1": "sumatriptan when an attack starts", "side_effect": "a "
                       "tight chest", "med2": "a daily low dose of propranolol"},
        },
        "habits": {"swimming": {"place": "the Zuiderbad", "buddy": "Noor"}},
    },
    {
        "kb": "grace", "skip_kinds": ["conference", "parents_visit"],
        "name": "Grace", "gender": "f", "style": "notes", "cur": "£",
        "start": "2023-07-10", "months": 13, "sessions": 32,
        "home": "Norwich", "employer": None, "partner": "Arthur",
        "friends": ["Marjorie", "Pat", "Dennis", "Yvonne"],
        "threads": {
            "health": {"symptom": "{my} knee swelling after walks", "diagnosis":
                       "osteoarthritis in the right knee", "med1": "ibuprofen gel",
                       "side_effect": "a rash where {u} applied it", "med2": "paracetamol "
                       "and physiotherapy exercises"},
            "wedding": {"sibling": "Chloe", "sibling_rel": "granddaughter", "fiance": "Sami",
                        "venue1": "Blickling Hall", "venue2": "a marquee on the farm",
                        "wedding_date": "@3", "role": "the one doing a reading",
                        "speech_story": "Chloe's first nativity play, as a sheep",
                        "friend": "Marjorie", "wedding_moment": "Arthur gave an "
                        "unscheduled speech about his own wedding"},
            "project": {"project": "the memoir", "project_what": "a memoir of {my} forty "
                        "years teaching, for the grandchildren", "friend": "Pat",
                        "help": "typing up the old diaries", "hard_part": "deciding what to "
                        "leave out", "liked": "the chapter about the school trip to "
                        "Wales", "confusing": "the jumps between decades",
                        "setback": "The laptop died and two chapters were not saved "
                        "anywhere", "milestone": "the memoir was printed as a proper book "
                        "and the first copy went to Chloe"},
            "pet": {"animal": "dog", "pet": "Mabel", "pet_trait": "a grey muzzle and "
                    "a love of sofas", "vet_issue": "Mabel hurt a paw on broken glass",
                    "pet_news": "Mabel walks nicely on the lead now, mostly"},
        },
        "habits": {"choir": {"buddy": "Hugh", "piece": "Handel's Messiah"},
                   "allotment": {"buddy": "Dennis"}},
    },
]
