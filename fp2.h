HTTP/1.1 200 OK
Content-Type: application/json
X-Docstream-Conversation-Id: c9985601-7781-4a8b-b1a2-ad5be9e73941
X-Docstream-Response-Id: chat_3af72394ee2ce6a6b18dbd8f
X-Request-Id: 3bbc357013661b7b
Date: Thu, 26 Nov 2026 01:42:23 GMT
Content-Length: 863

