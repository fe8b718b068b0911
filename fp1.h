HTTP/1.1 200 OK
Content-Type: application/json
X-Docstream-Conversation-Id: c9985601-7781-4a8b-b1a2-ad5be9e73941
X-Docstream-Response-Id: chat_4706de7de66e38d56145400b
X-Request-Id: 60721f8df83a36a9
Date: Thu, 26 Nov 2026 01:42:21 GMT
Content-Length: 772

