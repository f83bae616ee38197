"""How retail customers word their requests: intent, identity, contingency and change-of-mind templates.

Templates are ``str.format`` strings over the retail slot contract:

- ``{order}``: a noun phrase, "order #W1234567" by default or a description such as "my order with the Desk
  Lamp", so a template never puts "my" or "the" in front of it;
- ``{items}`` / ``{new_items}``: item descriptions with their article ("the Desk Lamp (black)", "the same one a
  size up"); ``{first_choice}`` / ``{second_choice}`` likewise;
- ``{payment}``: "my Visa credit card ending in 4242" or "the card I paid with";
- ``{address}``: one line ("12 Elm St, Apt 3, Austin, TX 78701");
- ``{reason}`` / ``{Reason}``: a clause ("I ordered it by mistake"), capitalised for a sentence start;
- ``{summary}``: one or two full sentences on why a person is needed.

Ids are positions in these lists (``retail:intent:cancel_pending_order:7``), so templates are only ever appended:
editing or reordering one would change what an existing id means.
"""

from __future__ import annotations

TONES = ("polite and patient", "in a hurry", "a little frustrated", "chatty and friendly", "terse",
         "unsure about the details", "formal and precise", "tired and short on time")  # fmt: skip

#: Cancellation reason (the tool's enum value) -> how customers say it, as a clause.
REASON_PHRASES: dict[str, tuple[str, ...]] = {
    "no longer needed": (
        "I no longer need it",
        "I don't need it anymore",
        "it's no longer needed",
        "I found what I needed elsewhere and don't need it now",
        "my plans changed and I won't need it",
    ),
    "ordered by mistake": (
        "I ordered it by mistake",
        "I placed it by accident",
        "it was ordered by mistake",
        "I hit the order button by mistake",
        "I ordered the wrong thing by mistake",
    ),
}

INTENTS: dict[str, list[str]] = {
    "cancel_pending_order": [
        "Please cancel {order}; {reason}.",
        "I'd like to cancel {order} because {reason}.",
        "Can you cancel {order}? {Reason}.",
        "Cancel {order}, please. {Reason}.",
        "{Reason}, so I'd like {order} cancelled before it ships.",
        "I need {order} cancelled. The reason is simple: {reason}.",
        "Hi, quick one: please cancel {order}. {Reason}.",
        "I would be grateful if you could cancel {order}, as {reason}.",
        "ugh, {reason}. Can you just cancel {order}?",
        "So, um, I think I want to cancel {order}. {Reason}, to be honest.",
        "Cancel {order}. {Reason}.",
        "I'm writing to request the cancellation of {order}; {reason}.",
        "Is it too late to cancel {order}? {Reason}, so I'd rather not have it sent.",
        "I placed {order} a little while ago and now {reason}. Please cancel the whole thing.",
        "Could {order} be cancelled? {Reason}. Thanks for sorting it out.",
        "Please stop {order} from shipping and cancel it; {reason}.",
        "I really don't want {order} anymore. {Reason}. Cancel it, please.",
    ],
    "modify_pending_order_items": [
        "In {order}, please change {items} to {new_items}, and settle any price difference with {payment}.",
        "I want to swap {items} in {order} for {new_items}; use {payment} for the difference.",
        "Could you update {order}: instead of {items} I want {new_items}. Any difference goes on {payment}.",
        "Before {order} ships, can you switch {items} to {new_items}? Charge or refund {payment} for the difference.",
        "I ordered {items} in {order} but I actually want {new_items}. Please change it and use {payment} if the "
        "price is different.",
        "Change {items} to {new_items} in {order}. Difference to {payment}.",
        "I'd like to amend {order}: replace {items} with {new_items}. Please use {payment} for any price change.",
        "hey, {order} hasn't shipped yet so can you swap {items} for {new_items}? put any difference on {payment}",
        "I picked the wrong option. In {order}, {items} should be {new_items}; settle the difference with {payment}.",
        "Is it possible to change {items} in {order} to {new_items}? If there's a price difference, use {payment}.",
        "I've been going back and forth on this, sorry. In {order}, could you make {items} into {new_items} "
        "instead? Any difference can go on {payment}.",
        "Please modify {order} so that it contains {new_items} rather than {items}. Any balance should be "
        "settled with {payment}.",
        "For {order}: out with {items}, in with {new_items}. Use {payment} for whatever the difference is.",
        "I hope this isn't a hassle, but I'd like {new_items} instead of {items} in {order}. Please settle the "
        "difference on {payment}.",
        "This is the second time I'm trying to fix this: {order} has {items}, and I want {new_items}. Use "
        "{payment} for the difference.",
        "I'd like to exchange {items} for {new_items} while {order} is still pending, with any difference going "
        "to {payment}.",
    ],
    "modify_pending_order_address": [
        "Please ship {order} to {address} instead.",
        "I need to change the shipping address of {order} to {address}.",
        "{order} should go to {address}, not where it's going now.",
        "Can you send {order} to {address}? I won't be at the old address.",
        "I'd like to update the delivery address on {order}. The new one is {address}.",
        "Wrong address on {order}. It should be {address}.",
        "Could you redirect {order} to {address} before it ships?",
        "I'm staying somewhere else for a while, so please have {order} delivered to {address}.",
        "New shipping address for {order}: {address}.",
        "I typed the address wrong when I placed {order}. The right one is {address}; can you fix it?",
        "I would like to request that {order} be shipped to {address} instead of the address on file.",
        "Oh no, I just realised {order} is going to my old place. Can you change it to {address}?",
        "Please change where {order} ships to. Use {address}.",
        "Um, is it possible to change the address for {order}? I'd need it to go to {address}.",
        "{order} needs to go to {address}. Please update it, I don't want it lost.",
        "If {order} hasn't left yet, could you update its shipping address to {address}? Thank you so much.",
    ],
    "modify_pending_order_payment": [
        "Please pay for {order} with {payment} instead.",
        "I'd like to switch the payment of {order} to {payment}.",
        "Can you charge {payment} for {order} instead of what I used?",
        "Change the payment method on {order} to {payment}.",
        "I'd rather pay for {order} with {payment}. Can you swap it over?",
        "For {order}, please use {payment} instead of the current payment method.",
        "Could you move the charge for {order} onto {payment}?",
        "I paid for {order} with the wrong method. Please use {payment} instead.",
        "Payment for {order} should be {payment}.",
        "I would like to change the form of payment for {order} to {payment}, please.",
        "hi, can {order} be paid with {payment} instead? the other one is nearly maxed out",
        "I'm not sure it's allowed, but could {order} be charged to {payment} rather than what I picked?",
        "Please refund the original payment on {order} and charge {payment} instead.",
        "I'd like {payment} to be used for {order}. It's still pending, so I hope that's doable.",
        "Swap the payment on {order} to {payment}, please.",
        "The charge on {order} went to the wrong place. I want it on {payment}, and quickly please.",
    ],
    "return_delivered_order_items": [
        "I want to return {items} from {order}; refund it to {payment}.",
        "Please start a return for {items} from {order}, with the refund going to {payment}.",
        "I'd like to send back {items} from {order} and get my money back on {payment}.",
        "Return {items} from {order}. Refund to {payment}.",
        "{items} from {order} didn't work out for me. Can I return that and get the refund on {payment}?",
        "I received {order} but I don't want {items}. Please process a return and refund {payment}.",
        "I would like to return {items}, which came in {order}. Please issue the refund to {payment}.",
        "honestly not happy with {items} from {order}. want to send that back, refund to {payment} please",
        "Could you help me return {items} from {order}? I'd like the money back on {payment}.",
        "I'm returning {items} from {order}. Put the refund on {payment}.",
        "{order} arrived, and I'd like to return {items}. The refund should go to {payment}.",
        "I think I'd like to return {items} from {order}, if that's still possible. The refund can go to {payment}.",
        "I need to return {items} from {order}. I'd like the refund on {payment}, please.",
        "I've had {items} from {order} for a bit and I've decided not to keep what I got. Can you arrange a "
        "return, refunding {payment}?",
        "Kindly arrange a return of {items} from {order}, refunding {payment}.",
        "I want my money back for {items} from {order}. Refund {payment}.",
    ],
    "exchange_delivered_order_items": [
        "I'd like to exchange {items} from {order} for {new_items}; use {payment} for any difference.",
        "Can I swap {items} I received in {order} for {new_items}? Settle the difference with {payment}.",
        "Please exchange {items} from {order} for {new_items}, with any price difference on {payment}.",
        "I got {items} in {order}, but I need {new_items} instead. Use {payment} for the difference.",
        "Exchange {items} from {order} for {new_items}. Difference on {payment}.",
        "Could I exchange {items} from {order} for {new_items}? What I got doesn't suit me. Any difference can go "
        "on {payment}.",
        "I would like to exchange {items}, delivered in {order}, for {new_items}. Please settle any difference "
        "with {payment}.",
        "So {order} came and I'm not happy with {items}. Can you exchange what I got for {new_items}? Use "
        "{payment} if the price changes.",
        "I need an exchange: {items} from {order} for {new_items}. Any balance to {payment}.",
        "I'm a bit unsure how exchanges work, but I'd like {new_items} instead of {items} from {order}. Any "
        "difference can go on {payment}.",
        "Please swap {items} from {order} for {new_items}. If it costs more or less, use {payment}.",
        "What I got in {order} isn't working for me. I'd like to exchange {items} for {new_items}, with "
        "{payment} for the difference.",
        "I want {new_items} in place of {items} from {order}; please put any difference on {payment}.",
        "could you exchange {items} from {order} for {new_items}? difference on {payment}, thx",
        "I've already been waiting a while for this to be right. Exchange {items} from {order} for {new_items} "
        "and settle it with {payment}.",
        "Would it be possible to exchange {items} that came in {order} for {new_items}? I'd use {payment} for "
        "any difference in price.",
    ],
    "modify_user_address": [
        "Please update my default address to {address}.",
        "I moved: my new address is {address}. Can you update my account?",
        "Change the address on my account to {address}, please.",
        "I've moved. Please set my address to {address}.",
        "Could you update the default address on my profile to {address}?",
        "New address: {address}. Please update my account.",
        "I'd like my account's address changed to {address}.",
        "We just moved house! My new address is {address}; could you put that on my account?",
        "I would like to update the address associated with my account to {address}.",
        "my address changed, it's {address} now. pls update",
        "Can you make {address} my default address from now on?",
        "I think my account still has my old address. It should be {address}.",
        "Update my account address to {address}.",
        "Please replace the default address on my account with {address}.",
        "My address on file is out of date. It's {address} now, and I'd like that fixed before my next order.",
        "Hello, I recently relocated and my address is now {address}. Could you update my details?",
    ],
    "transfer_to_human_agent": [
        "I need to talk to a human about {order}: {summary}",
        "Please put me through to a person about {order}. {summary}",
        "{summary} It's about {order}. Can I speak with a human agent?",
        "I'd like to speak to a real person regarding {order}. {summary}",
        "Can you transfer me to a human? This is about {order}. {summary}",
        "{summary} I'd prefer a human to handle this; it concerns {order}.",
        "Get me a human, please, about {order}. {summary}",
        "About {order}: {summary} I want a person to look into it.",
        "I would like to escalate an issue with {order} to a human representative. {summary}",
        "{summary} Honestly I just want to talk to someone. It's {order}.",
        "Is there a person I can talk to about {order}? {summary}",
        "Please hand me over to a human agent. It's {order}, and here's the problem: {summary}",
        "I have a problem with {order} that I think needs a human. {summary}",
        "{summary} The order is {order}. Please pass me to a person.",
        "Regarding {order}. {summary} I'd like a human agent, please.",
        "I don't want to go back and forth with a bot on this. {summary} It's {order}; please get me a person.",
    ],
    "track_order": [
        "Where is {order}? Please tell me the carrier and the tracking number.",
        "Can you give me the tracking number for {order}, and which carrier has it?",
        "I'd like to track {order}. Which carrier is it with, and what's the tracking number?",
        "What's the tracking number and carrier for {order}?",
        "Could you tell me who is delivering {order} and give me the tracking number?",
        "{order} still hasn't arrived. What carrier is it with and what's the tracking number?",
        "Tracking number and carrier for {order}, please.",
        "I would like the carrier and tracking number for {order}, please.",
        "hey where's {order} at? need the carrier + tracking number",
        "Sorry to bother you, but could you look up {order}? I'd like the carrier and the tracking number.",
        "I'm waiting on {order}. Can you tell me the shipping carrier and tracking number so I can follow it?",
        "Has {order} shipped? If so, I need the tracking number and the carrier's name.",
        "Can I get tracking for {order}? Carrier and number, please.",
        "My package from {order} seems to be taking forever. Which carrier is it with, and what's the tracking number?",
        "Please provide the carrier and the tracking number for {order}.",
        "I want to check on {order} myself. What's the tracking number and which carrier is handling it?",
    ],
    "get_order_details": [
        "What is the status of {order}, and what was its total?",
        "Can you tell me where {order} stands and how much I paid in total?",
        "What's the current status of {order}? And what did it cost in total?",
        "I'd like to know the status and the total amount of {order}.",
        "Status and total for {order}, please.",
        "Could you check {order} for me? I need its status and the order total.",
        "I can't remember what {order} came to. What's the total, and what status is it in?",
        "Please confirm the status of {order} and the total I was charged for it.",
        "I would like to know the present status of {order} as well as its total cost.",
        "hi, what's going on with {order}? status and total please",
        "I'm not sure whether {order} went through. What's its status, and what was the total?",
        "Can you look up {order}? Tell me its status and how much the whole order cost.",
        "What state is {order} in right now, and what was the order total?",
        "For my records, I need the status and total of {order}.",
        "I keep getting confused about {order}. What is its status and what did I pay altogether?",
        "Give me the status of {order} and its total.",
    ],
}

#: Identification tool -> how customers introduce themselves (slots: the tool's arguments).
IDENTITY: dict[str, list[str]] = {
    "find_user_by_email": [
        "My email is {email}.",
        "You can find my account under {email}.",
        "My account email is {email}.",
        "The email on my account is {email}.",
        "I'm registered with {email}.",
        "Account: {email}.",
        "It's {email}, that's the email I use with you.",
        "In case you need it, my account is under the email {email}.",
    ],
    "find_user_by_name_zip": [
        "I'm {first_name} {last_name}, zip code {zip}.",
        "My name is {first_name} {last_name} and my zip is {zip}.",
        "This is {first_name} {last_name}; my zip code is {zip}.",
        "{first_name} {last_name} here, zip {zip}.",
        "Name's {first_name} {last_name}, and I'm in zip code {zip}.",
        "You can look me up as {first_name} {last_name}, zip {zip}.",
        "My account should be under {first_name} {last_name}, with the zip code {zip}.",
        "It's {first_name} {last_name} speaking. Zip code {zip}.",
    ],
}

#: First lines of a customer who gives no details until asked (one fact an answer).
OPENERS: list[str] = [
    "Hi, I need some help with an order.",
    "Hello, I have a question about something I bought.",
    "Hi there, can you help me with my account?",
    "Hey, I need to sort something out with an order.",
    "Good afternoon. I'd like some help with a purchase, please.",
    "Hi. I need to make a change.",
    "Hello? I was told I could get help with my orders here.",
    "Hi, I'm having an issue and I hope you can help.",
    "Excuse me, I need assistance with an order of mine.",
    "Hey there. Got a minute to help me with something I ordered?",
]

#: Contingency kind -> one conditional request; the agent must look up which branch applies.
CONTINGENCIES: dict[str, list[str]] = {
    # slots: {order}, {reason}, {items}, {payment}
    "cancel_or_return": [
        "If {order} hasn't shipped yet, please cancel it because {reason}. If it has already arrived, I'd like "
        "to return {items} instead, with the refund going to {payment}.",
        "{Reason}. So: if {order} is still pending, cancel it; if it's been delivered, return {items} and refund "
        "{payment}.",
        "I don't want {order} anymore ({reason}). I'm not sure whether it went out yet. If not, cancel it; if it "
        "was delivered, I'll send back {items} and want the money on {payment}.",
        "Can you check {order}? If it hasn't shipped, cancel it, {reason}. If it's already been delivered, start "
        "a return for {items}, refunding {payment}.",
        "I'd like to get out of {order}: cancel it if you still can, since {reason}. Otherwise, if it arrived, "
        "please return {items} and put the refund on {payment}.",
        "Either cancel {order} if it's still pending, or, if it's been delivered, return {items} with the refund "
        "to {payment}. {Reason}.",
        "{order}: if it hasn't left the warehouse, please cancel it, {reason}. If it's already been delivered, "
        "I'll return {items}; refund {payment}.",
    ],
    # slots: {order}, {items}, {first_choice}, {second_choice}, {payment}
    "swap_fallback": [
        "In {order}, please swap {items} for {first_choice} if you have it in stock, otherwise {second_choice}. "
        "Use {payment} for any difference.",
        "I'd like {first_choice} instead of {items} in {order}. If that's not available, {second_choice} is fine. "
        "Settle any difference with {payment}.",
        "Could you change {items} in {order} to {first_choice}? If it's out of stock, go with {second_choice}. "
        "Charge or refund the difference on {payment}.",
        "For {order}: replace {items} with {first_choice}, or {second_choice} if the first isn't in stock. Put "
        "any difference on {payment}.",
        "My first choice would be {first_choice} in place of {items} from {order}; failing that, {second_choice}. "
        "Please use {payment} for the price difference.",
        "I want to swap {items} in {order}. Ideally for {first_choice}, but if you don't have it, {second_choice} "
        "will do. Any difference on {payment}.",
        "Is {first_choice} in stock? If so, please swap {items} in {order} for it; if not, use {second_choice}. "
        "Use {payment} for the difference.",
    ],
}

#: Write tool -> what the user says when asked to confirm and they have changed their mind (each template
#: speaks of the one value that changed: the slot it uses besides {order}).
REVISIONS: dict[str, list[str]] = {
    "cancel_pending_order": [
        "Actually, before you do that: the real reason is that {reason}.",
        "Yes, cancel it, but please put the reason down as: {reason}.",
        "Wait, I said that wrong. {Reason}; that's the reason.",
        "Hmm, let me correct the reason first: {reason}. Then go ahead.",
    ],
    "modify_pending_order_items": [
        "Actually, wait: could you make it {new_items} instead?",
        "Hold on, I've changed my mind. I'd rather have {new_items}.",
        "Sorry, one change before you confirm: I want {new_items}, not what I said.",
        "Hmm, no. Let's go with {new_items} instead.",
        "On second thought, make that {new_items}.",
    ],
    "modify_pending_order_address": [
        "Wait, I gave you the wrong address. It should be {address}.",
        "Actually, please send it to {address} instead.",
        "Sorry, scratch that address. Use {address}.",
        "Before you confirm: the correct address is {address}.",
    ],
    "modify_pending_order_payment": [
        "Actually, let's use {payment} instead.",
        "Hmm, on second thought, charge {payment}.",
        "Wait, sorry, I meant {payment}.",
        "Before you confirm: please put it on {payment} rather than what I said.",
    ],
    "return_delivered_order_items": [
        "Actually, I'd rather have the refund go to {payment}.",
        "Wait, refund {payment} instead, please.",
        "Sorry, change of plan for the refund: {payment}.",
        "Before you confirm: can the money go back to {payment}?",
        "Actually, I only want to return {items}.",
        "Hold on, let me correct that: the return should be {items}.",
        "Sorry, I mixed things up. It's {items} I want to return.",
        "Wait, change that: please return {items} instead.",
    ],
    "exchange_delivered_order_items": [
        "Actually, wait: could I get {new_items} instead?",
        "Hmm, I've changed my mind. Make the exchange for {new_items}.",
        "Sorry, before you confirm: I want {new_items}, not what I said before.",
        "On second thought, I'd prefer {new_items}.",
        "Actually, settle the difference with {payment} instead.",
        "Wait, please use {payment} for the difference.",
        "Sorry, one thing: put any difference on {payment}.",
        "Before you confirm, can we use {payment} for the difference instead?",
    ],
    "modify_user_address": [
        "Oh wait, I made a mistake. The address should be {address}.",
        "Actually, the right address is {address}.",
        "Sorry, let me correct that: {address}.",
        "Before you save it: please use {address} instead.",
    ],
}

#: Slots whose text is wording, not a fact the agent needs verbatim (a rewrite may say it its own way).
FREE_SLOTS = ("reason", "Reason", "summary")

#: Requests that leave the new address out: a piecemeal customer gives it only when the agent asks for it.
WITHHELD: dict[str, list[str]] = {
    "modify_user_address": [
        "I've moved and need to update the address on my account.",
        "My address has changed. Can you update it on my account?",
        "I need to change my default address, I just moved.",
        "Could you help me update my address? I moved last week.",
        "New place, new address. I'd like my account updated.",
        "I want to change the address you have on file for me.",
    ],
    "modify_pending_order_address": [
        "I need {order} to go to a different address.",
        "Can I still change where {order} is being shipped?",
        "I'd like to send {order} somewhere else. Can you change the shipping address?",
        "The shipping address on {order} is wrong; I need to give you a new one.",
        "Please change the delivery address for {order}.",
        "I won't be home for {order}. Can you ship it to another address?",
    ],
}
